"""`dyno` against hosts that speak only the C++ daemons' JSON RPC (dynolog's stock daemon, msMonitor's),
alone and in a fleet with this project's daemon: the real CLI as a subprocess, a stand-in for each C++
daemon (tests/stand_ins/legacy_daemon.py) that records the bytes it got, plaintext and mutual TLS.

What is held: the exact requests (framing, the config keys each kind sends, job/pids/limit), the
answers printed as for this project's daemon, each refusal of what an old daemon cannot do (per host,
exit 1 for that host only), and that a host answering gRPC is never asked in the legacy RPC.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

import certs_factory as cf
import legacy_cli
from dyno.edge import legacy
from dyno.fleet.target import Target
from dynocerts.policy import Role
from dynoproto import legacy as wire
from harness import Completed, Daemon, Dyno, free_port, read_line_until, stop_process

STAND_IN = Path(__file__).resolve().parent / "stand_ins" / "legacy_daemon.py"
PROCESSES = "101,102"
# A short --timeout: detecting the stock daemon costs half of it (no HTTP/2 SETTINGS ever comes).
TIMEOUT = ("--timeout", "2")


@dataclass
class StandIn:
    """One stand-in C++ daemon process, and the requests it recorded (read from its output, in order)."""

    proc: subprocess.Popen  # type: ignore[type-arg]
    port: int

    def request(self) -> bytes:
        """The next whole request it got: the 4-byte length, then the body."""
        line = read_line_until(self.proc, "request ", timeout=10)
        return base64.b64decode(line.split(" ", 1)[1])

    def body(self) -> Dict[str, Any]:
        raw = self.request()
        assert struct.unpack("<i", raw[:4])[0] == len(raw) - 4  # little-endian on x86-64 and aarch64
        return json.loads(raw[4:])  # type: ignore[no-any-return]

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def stand_in() -> Iterator[Callable[..., StandIn]]:
    started: List[StandIn] = []

    def start(flavor: str, certs: Optional[cf.CertsDir] = None, busy: str = "") -> StandIn:
        cmd = [sys.executable, str(STAND_IN), "--flavor", flavor, "--processes", PROCESSES, "--busy", busy]
        proc = subprocess.Popen(
            [*cmd, *(["--certs-dir", str(certs)] if certs else [])], stdout=subprocess.PIPE
        )
        one = StandIn(proc, int(read_line_until(proc, "legacy stand-in ready").rsplit("=", 1)[1]))
        started.append(one)
        return one

    yield start
    for one in started:
        stop_process(one.proc)


@dataclass(frozen=True)
class Pki:
    server: cf.CertsDir
    client: cf.CertsDir


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """One CA for the stand-in, our daemon and dyno: `dyno certs`-style material, PKCS#8 keys."""
    ca, folder = cf.authority(), tmp_path_factory.mktemp("pki")
    server = cf.certs_dir(folder / "server", Role.SERVER, ca, cf.leaf(ca, Role.SERVER, "localhost"))
    return Pki(server, cf.certs_dir(folder / "client", Role.CLIENT, ca, cf.leaf(ca, Role.CLIENT, "operator")))


def dyno(port: int, *args: str) -> Completed:
    return Dyno(("--port", str(port), *TIMEOUT))(*args)


def across(hosts: List[str], *args: str) -> Completed:
    """With this project's daemon among the hosts: a --timeout whose handshake bound (3 s) a loaded
    machine's daemon meets, as a real one would."""
    return dyno(1778, "--timeout", "6", "--hosts", ",".join(hosts), *args)


def config(body: Dict[str, Any]) -> List[str]:
    """The request's config text as its KEY=VALUE lines."""
    assert body["fn"] == "setKinetOnDemandRequest"
    return body["config"].split("\n")  # type: ignore[no-any-return]


GET_STATUS = b'\x12\x00\x00\x00{"fn":"getStatus"}'
GET_VERSION = b'\x13\x00\x00\x00{"fn":"getVersion"}'


def asked_nothing_more(old: StandIn) -> None:
    """The stand-in's next requests are those of a `dyno version` run now: nothing came in between."""
    assert dyno(old.port, "version").returncode == 0
    assert [old.request(), old.request()] == [GET_STATUS, GET_VERSION]


# --- one host -----------------------------------------------------------------------------------------


def test_status_and_version_of_a_stock_dynolog(stand_in: Callable[..., StandIn]):
    old = stand_in("dynolog")
    result = dyno(old.port, "status")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"dynolog's C++ daemon 0.6.0 at localhost:{old.port} (legacy JSON RPC, plaintext)",
        '  getStatus:  {"status":1}',
    ]
    # Both CLIs' exact bytes; the gRPC attempt before them was closed, or the stock server, one
    # connection at a time, would never have read them.
    assert [old.request(), old.request()] == [GET_STATUS, GET_VERSION]

    answer = json.loads(dyno(old.port, "--json", "status").stdout)
    assert answer == {"legacy": "dynolog", "version": "0.6.0", "tls": False, "status": 1}
    version = dyno(old.port, "version")
    assert version.stdout.startswith("dynolog 0.6.0 (api legacy JSON RPC (dynolog)"), version.stdout


def test_gputrace_on_a_stock_dynolog_sends_its_keys_and_names_each_file(stand_in: Callable[..., StandIn]):
    old = stand_in("dynolog", busy="102")
    result = dyno(old.port, "gputrace", "--log-file", "/tmp/t.json", "--profile-memory", "--job-id", "7")
    assert result.returncode == 0, result.stderr
    assert old.request() == GET_STATUS
    body = old.body()
    assert (body["job_id"], body["pids"], body["process_limit"]) == (7, [0], 1000)  # the daemon's "no limit"
    assert config(body) == legacy_cli.stock_gputrace("/tmp/t.json", memory=True)  # its CLI's very lines
    assert "commandStatus: effective" in result.stdout
    assert "2 process(es) matched, 1 triggered" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["101", "-", "triggered", "/tmp/t_101.json"] in rows
    assert ["102", "-", "trace_busy", "a", "command", "already", "waits", "for", "it"] in rows

    steps = dyno(old.port, "gputrace", "--log-file", "/tmp/t.json", "--iterations", "3", "--pids", "101,9")
    assert steps.returncode == 0, steps.stderr
    old.request()
    body = old.body()
    assert body["pids"] == [101, 9]
    assert config(body) == legacy_cli.stock_gputrace("/tmp/t.json", iterations=3)


def test_no_process_matched_on_a_stock_dynolog_is_dynologs_exit_0(stand_in: Callable[..., StandIn]):
    old = stand_in("dynolog")
    result = dyno(old.port, "gputrace", "--log-file", "/tmp/t.json", "--pids", "5")
    assert result.returncode == 0, result.stderr
    assert "commandStatus: ineffective" in result.stdout and "no process matched" in result.stdout
    failing = dyno(old.port, "gputrace", "--log-file", "/tmp/t.json", "--pids", "5", "--fail-on-no-process")
    assert failing.returncode == 1


def test_a_stock_dynolog_is_sent_no_npu_command(stand_in: Callable[..., StandIn]):
    """It would hand the text to Kineto, which runs any config as a trace of its own."""
    old = stand_in("dynolog")
    for command in (
        ["nputrace", "--log-file", "/tmp/d", "--iterations", "2"],
        ["npu-monitor", "--npu-monitor-start"],
    ):
        result = dyno(old.port, *command)
        assert result.returncode == 1
        assert result.stderr == (
            f"dyno: localhost is a C++ dynolog daemon (legacy JSON RPC): dyno {command[0]} needs msMonitor's "
            "daemon or this project's\n"
        )
        assert old.request() == GET_STATUS
        asked_nothing_more(old)


def test_msmonitor_in_mutual_tls_nputrace_and_npu_monitor(stand_in: Callable[..., StandIn], pki: Pki):
    old = stand_in("msmonitor", certs=pki.server)
    certs = ("--certs-dir", str(pki.client))
    status = dyno(old.port, *certs, "status")
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[:2] == [
        f"msMonitor's C++ daemon 0.3.2 at localhost:{old.port} (legacy JSON RPC, mutual TLS)",
        "  nputrace:   Idle; npumonitor: Idle; current step 42",
    ]
    assert [old.request(), old.request()] == [GET_STATUS, GET_VERSION]

    trace = dyno(
        old.port, *certs, "--json", "nputrace", "--log-file", "/data/prof", "--start-step", "100",
        "--iterations", "2", "--rank-list", "0,1", "--gc-detect-threshold", "1.5",
    )  # fmt: skip
    assert trace.returncode == 0, trace.stderr
    assert old.request() == GET_STATUS
    ranks = {"PROFILE_IS_RANK": "true", "PROFILE_RANK_LIST": "0,1", "PROFILE_GC_DETECT_THRESHOLD": "1.5"}
    assert config(old.body()) == legacy_cli.msmonitor_nputrace("/data/prof", 100, 2, **ranks)
    answer = json.loads(trace.stdout)
    assert answer["commandStatus"] == "effective" and answer["processes_matched"] == [101, 102]

    monitor = dyno(old.port, *certs, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel")
    assert monitor.returncode == 0, monitor.stderr
    assert old.request() == GET_STATUS
    # Its CLI's lines (not this project's TOP_N), but for the float: configtext writes 0.0 where Rust
    # writes 0 (the same number; this daemon's own text to msMonitor's plugins writes it so too).
    kinds = {"MSPTI_ACTIVITY_KIND": "Kernel", "DURATION": "0.0"}
    assert config(old.body()) == legacy_cli.msmonitor_npu_monitor(True, **kinds)


@pytest.mark.parametrize(
    "command, feature",
    [
        (["processes"], "dyno processes"),
        (["trace", "0123abcd"], "dyno trace"),
        (["incidents"], "dyno incidents"),
        (["dynamic", "--pid", "101", "--output", "/tmp/d"], "dyno dynamic"),
        (["npu-monitor", "--status"], "npu-monitor --status"),
        (["npu-monitor", "--npu-monitor-start", "--watch"], "npu-monitor --watch"),
        (["nputrace", "--log-file", "/tmp/d", "--iterations", "2", "--wait"], "--wait"),
        (["nputrace", "--log-file", "/tmp/d", "--duration-ms", "500"], "a time-based nputrace"),
    ],
)
def test_what_msmonitor_cannot_do_is_refused_before_anything_is_sent(
    stand_in: Callable[..., StandIn], command: List[str], feature: str
):
    old = stand_in("msmonitor")
    result = dyno(old.port, *command)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(
        f"dyno: localhost is a C++ msMonitor daemon (legacy JSON RPC): {feature}"
    ), result.stderr
    assert old.request() == GET_STATUS
    asked_nothing_more(old)


def test_an_msmonitor_daemon_whose_certificate_we_do_not_trust_is_refused_as_any_daemon(
    stand_in: Callable[..., StandIn], pki: Pki, tmp_path: Path
):
    """gRPC checks the certificate before ALPN: no legacy request goes to an untrusted server."""
    other = cf.authority(cn="Another CA")
    server = cf.certs_dir(tmp_path / "server", Role.SERVER, other, cf.leaf(other, Role.SERVER, "localhost"))
    old = stand_in("msmonitor", certs=server)
    result = dyno(old.port, "--certs-dir", str(pki.client), "status")
    assert result.returncode == 3
    assert result.stderr.startswith(
        f"dyno: cannot reach dynolog at localhost:{old.port}: the daemon's certificate is not trusted"
    ), result.stderr
    assert "dropped" in read_line_until(old.proc, "dropped", timeout=10)  # the handshake, and no request


def test_a_daemon_of_this_project_whose_grpc_is_slow_is_never_taken_for_a_legacy_one(
    stand_in: Callable[..., StandIn],
):
    """It answers the legacy RPC too, with both C++ daemons' keys: dyno reports the slow gRPC."""
    ours = stand_in("this-project")
    result = dyno(ours.port, "status")
    assert result.returncode == 3
    assert "timed out before receiving SETTINGS frame" in result.stderr and "legacy" not in result.stderr
    assert ours.request() == GET_STATUS  # it was asked, and its answer said whose it is


def test_this_projects_real_daemon_answering_the_legacy_rpc_is_not_taken_for_a_cpp_one(daemon: Daemon):
    """The stand-in above mimics this: the daemon's own getStatus reply is what dyno tells it by."""
    target = Target(port=daemon.port)
    assert legacy.call(target, wire.call(wire.GET_STATUS), time.monotonic() + 10)  # it does answer
    assert legacy.probe(target, time.monotonic() + 10, None) is None


def test_a_port_nobody_listens_on_is_not_taken_for_a_legacy_daemon():
    result = dyno(free_port(), "status")
    assert result.returncode == 3
    assert "Connection refused" in result.stderr and "legacy" not in result.stderr


# --- a fleet part-way through ------------------------------------------------------------------------


def rows(text: str, host: str) -> List[List[str]]:
    return [line.split() for line in text.splitlines() if line.startswith(host + " ")]


def test_a_mixed_fleet_answers_status_and_refuses_what_old_hosts_cannot(
    stand_in: Callable[..., StandIn], daemon: Daemon
):
    stock, msmonitor = stand_in("dynolog"), stand_in("msmonitor")
    new = f"127.0.0.1:{daemon.port}"
    hosts = [new, stock.host, msmonitor.host]
    status = across(hosts, "status")
    assert status.returncode == 0, status.stderr
    assert rows(status.stdout, stock.host) == [
        [stock.host, "0.6.0", "(dynolog)", "-", "plain", "-", "-", "-", "-"]
    ]
    assert rows(status.stdout, msmonitor.host)[0][1:] == [
        *["0.3.2", "(msMonitor)", "-", "plain", "-"],
        *["Idle", "Idle", "42"],
    ]
    assert rows(status.stdout, new)[0][1] != "0.6.0"  # ours, over gRPC
    assert status.stdout.splitlines()[-1] == "3 hosts: 3 effective, 0 ineffective, 0 unreachable"
    assert [stock.request(), msmonitor.request()] == [GET_STATUS, GET_STATUS]  # each host asked alone

    processes = across(hosts, "processes")
    assert processes.returncode == 1
    for old, flavor in ((stock, "dynolog"), (msmonitor, "msMonitor")):
        assert (
            f"{old.host}  ineffective: {old.host} is a C++ {flavor} daemon (legacy JSON RPC): dyno processes "
            "needs this project's daemon"
        ) in processes.stdout
    assert processes.stdout.splitlines()[-1] == "3 hosts: 1 effective, 2 ineffective, 0 unreachable"
    assert processes.stderr.startswith("dyno: 2 of 3 hosts did not answer effective")

    trace = across(hosts, "gputrace", "--log-file", "/tmp/t.json")
    assert rows(trace.stdout, stock.host)[0][1:5] == ["effective", "-", "101", "-"]
    assert "ineffective" in rows(trace.stdout, new)[0]  # no process there


def test_a_mixed_fleet_in_mutual_tls(
    stand_in: Callable[..., StandIn], start_daemon: Callable[..., Daemon], pki: Pki
):
    msmonitor = stand_in("msmonitor", certs=pki.server)
    ours = start_daemon("--certs-dir", str(pki.server))
    hosts = [f"127.0.0.1:{ours.port}", msmonitor.host]
    result = across(hosts, "--certs-dir", str(pki.client), "--json", "status")
    assert result.returncode == 0, result.stderr
    new, old = json.loads(result.stdout)
    assert (new["state"], new["answer"]["tls"], "legacy" in new["answer"]) == ("effective", True, False)
    assert old["answer"] == {
        "legacy": "msMonitor",
        "version": "0.3.2",
        "tls": True,
        "current_step": 42,
        "npumonitor": "Idle",
        "nputrace": "Idle",
    }


# --- a hostile or broken reply -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        struct.pack("=i", 0),
        struct.pack("=i", -5),
        struct.pack("=i", wire.MAX_REPLY + 1),  # refused before dyno buffers it
        struct.pack("=i", 100) + b'{"status":',  # closed short
        wire.frame(b"\xff\xfe"),
        wire.frame(b"[1,2]"),
        b"\x01\x00",  # closed inside the length
    ],
)
def test_a_reply_that_is_not_one_framed_json_object_is_refused(reply: bytes):
    with replying(reply) as port, pytest.raises(wire.LegacyError):
        legacy.call(Target(port=port), wire.call(wire.GET_STATUS), time.monotonic() + 10)


def test_a_server_that_never_answers_costs_the_deadline_only():
    began = time.monotonic()
    with replying(None) as port, pytest.raises(OSError):  # socket.timeout
        legacy.call(Target(port=port), wire.call(wire.GET_STATUS), began + 0.5)
    assert time.monotonic() - began < 5


@contextmanager
def replying(reply: Optional[bytes]) -> Iterator[int]:
    """A server on a free port that reads one request and sends *reply* (None: holds the connection
    until the test is done), on a thread stopped at the end."""
    done = threading.Event()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                if reply is None:
                    done.wait()
                else:
                    conn.sendall(reply)

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            yield server.getsockname()[1]
        finally:
            done.set()
            thread.join()
