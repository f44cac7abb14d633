"""`dyno` across many daemons, end to end: real daemons on separate loopback addresses (127.0.0.2, .3,
…), each with its own IPC folder and a server certificate naming its address, mutual TLS, and real
PyTorch training processes with the plugin behind two of them.

The hosts, by role:

* ``A``, ``B``: a daemon with a training process each;
* ``C``: a daemon with no process (commands are ineffective there);
* ``FOREIGN``: a daemon whose certificate another CA issued (TLS refuses it);
* ``SLOW1``, ``SLOW2``: daemons a test stops with SIGSTOP (the kernel still accepts connections; nothing
  answers), and resumes;
* ``DOWN``: an address nothing listens on (connection refused);
* ``EXTRA``: a daemon with a training process, restarted while a watch runs.

Every daemon listens on the port the first one got from the OS.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pytest

import certs_factory as cf
from dynocerts.policy import Role
from harness import Daemon, Dyno, Workload, dyno, read_line_until, stop_process, wait_until

pytestmark = pytest.mark.torch

A, B, C, FOREIGN, SLOW1, SLOW2, DOWN, EXTRA = (f"127.0.0.{i}" for i in range(2, 10))
SLURM_STAND_IN = Path(__file__).resolve().parent / "stand_ins" / "slurm"


@dataclass
class Cluster:
    workdir: Path
    ca: Any
    client: cf.CertsDir
    port: int = 0
    daemons: Dict[str, Daemon] = field(default_factory=dict)
    jobs: Dict[str, Workload] = field(default_factory=dict)

    def start(
        self, address: str, ca: Any = None, own_port: bool = False, extra: Sequence[str] = ()
    ) -> Daemon:
        """A daemon on *address* (the cluster's port, or one the OS gives it) with a server certificate
        naming that address, and the flags *extra*."""
        issuer = ca or self.ca
        name = f"{address}-own-port" if own_port else address
        server = cf.leaf(issuer, Role.SERVER, address, hosts=(address,))
        certs = cf.certs_dir(self.workdir / name / "server", Role.SERVER, issuer, server)
        args = ["--listen-address", address, "--certs-dir", str(certs), "--process-keepalive-s", "3", *extra]
        daemon = Daemon(self.workdir / name, [*args, "--port", str(0 if own_port else self.port)]).start()
        self.port = self.port or daemon.port
        self.daemons[name] = daemon
        return daemon

    @property
    def dyno(self) -> Dyno:
        """`dyno` as the cluster's operator runs it: its port, its client certificate. Fan-outs wait on
        every host, so a longer bound than one daemon's."""
        return Dyno(("--port", str(self.port), "--certs-dir", str(self.client)), timeout=120)

    def dyno_json(self, *args: str) -> Any:
        return self.dyno.json(*args)

    def processes(self, address: str) -> List[Dict[str, Any]]:
        return self.dyno_json("--hostname", address, "processes")  # type: ignore[no-any-return]

    def train_one_job(
        self, hosts: Sequence[str], job_id: str, args: Sequence[str] = (), slow_files: Optional[Path] = None
    ) -> List[Workload]:
        """One job of ``len(hosts)`` ranks, rank R behind ``hosts[R]``, in one gloo group that all-reduces
        each step, started together (each rank waits in the group for the others); back once every rank
        registered. With *slow_files*, rank R is slow while ``slow_files/slowR`` exists (train.py)."""
        group = ["--process-group", f"file://{self.workdir / f'rendezvous-{job_id}'}", "--all-reduce", *args]

        def start(rank: int) -> Workload:
            world = {"RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": str(len(hosts))}
            env = self.daemons[hosts[rank]].plugin_env(MSMONITOR_JOB_ID=job_id, **world)
            slow = ["--slow-file", str(slow_files / f"slow{rank}")] if slow_files else []
            job = self.jobs[hosts[rank]] = Workload("train.py", env, [*group, *slow])
            return job.start()

        with ThreadPoolExecutor(len(hosts)) as pool:
            ranks = list(pool.map(start, range(len(hosts))))
        for host, rank in zip(hosts, ranks):
            wait_until(
                lambda h=host, pid=rank.pid: any(p["pid"] == pid for p in self.processes(h)),  # type: ignore[misc]
                what=f"the rank behind {host} to register",
            )
        return ranks

    def train(self, address: str, rank: int) -> Workload:
        daemon = self.daemons[address]
        job = self.jobs[address] = Workload("train.py", daemon.plugin_env(RANK=str(rank))).start()
        wait_until(
            lambda: any(p["pid"] == job.pid and p["backend"] == "torch" for p in self.processes(address)),
            what=f"the trainer behind {address} to register",
        )
        return job


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    ca = cf.authority()
    workdir = tmp_path_factory.mktemp("cluster")
    client = cf.certs_dir(workdir / "client", Role.CLIENT, ca, cf.leaf(ca, Role.CLIENT, "operator"))
    cluster = Cluster(workdir, ca, client)
    try:
        for address in (A, B, C, SLOW1, SLOW2):
            cluster.start(address)
        cluster.start(FOREIGN, ca=cf.authority(cn="Another CA"))
        cluster.train(A, 0)
        cluster.train(B, 1)
        yield cluster
    finally:
        for job in cluster.jobs.values():
            job.stop()
        for daemon in cluster.daemons.values():
            daemon.cleanup()


@contextmanager
def stopped(*daemons: Daemon) -> Iterator[None]:
    """Daemons that accept connections (the kernel does) and answer nothing: slow hosts."""
    for daemon in daemons:
        assert daemon.proc is not None
        os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for daemon in daemons:
            assert daemon.proc is not None
            os.kill(daemon.proc.pid, signal.SIGCONT)


def connected(address: str, port: int) -> bool:
    """Whether a TCP connection to *address*:*port* is established, as the kernel lists it in
    ``/proc/net/tcp`` (addresses as little-endian hex, state 01), on either side: a stopped daemon's
    kernel completes the handshake, and lists its side in the accept queue, though nobody accepts."""
    (ip,) = struct.unpack("<I", socket.inet_aton(address))
    target = f"{ip:08X}:{port:04X}"
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return any(target in row[1:3] and row[3] == "01" for row in rows)


def rows_of(text: str, host: str) -> List[List[str]]:
    return [line.split() for line in text.splitlines() if line.startswith(host + " ")]


def test_status_one_table_a_summary_and_why_each_other_host_failed(cluster: Cluster):
    hosts = f"{A},{B},{C},{FOREIGN},{SLOW1},{SLOW2},{DOWN},nohost.invalid"
    with stopped(cluster.daemons[SLOW1], cluster.daemons[SLOW2]):
        asking = subprocess.Popen(
            cluster.dyno.command("--hosts", hosts, "--timeout", "4", "status"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Two slow hosts cost one timeout, not two: each has its own deadline and none waits for another.
        # Seen as an event, both connections open at once, not as a wall time a loaded machine stretches.
        try:
            wait_until(
                lambda: connected(SLOW1, cluster.port) and connected(SLOW2, cluster.port),
                what="both slow hosts asked at once",
            )
        finally:
            out, err = asking.communicate(timeout=120)
    result = subprocess.CompletedProcess(asking.args, asking.returncode, out, err)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["HOST", "VERSION", "UP", "TLS", "PROCESSES", "NPUTRACE", "NPUMONITOR", "STEP"]
    assert [row[0] for row in (rows_of(result.stdout, h)[0] for h in (A, B, C))] == [A, B, C]
    assert rows_of(result.stdout, A)[0][3:5] == ["mTLS", "1"] and rows_of(result.stdout, C)[0][4] == "0"
    untrusted = f"cannot reach dynolog at {FOREIGN}:{cluster.port}: the daemon's certificate is not trusted"
    assert f"{FOREIGN}  unreachable (TLS): {untrusted}" in result.stdout
    assert (
        f"{SLOW1}  unreachable (timeout): " in result.stdout
        and f"{SLOW2}  unreachable (timeout): " in result.stdout
    )
    assert f"{DOWN}  unreachable (refused): " in result.stdout
    assert "nohost.invalid  unreachable (DNS): " in result.stdout
    assert (
        lines[-1] == "8 hosts: 3 effective, 0 ineffective, 5 unreachable (2 timeout, 1 TLS, 1 refused, 1 DNS)"
    )
    assert result.stderr.startswith("dyno: 5 of 8 hosts did not answer effective: ")


def test_status_json_one_object_per_host_and_exit_codes(cluster: Cluster):
    answers = cluster.dyno_json("--hosts", f"{A},{DOWN},{FOREIGN}", "status")
    assert [(a["host"], a["state"], a.get("reason")) for a in answers] == [
        (A, "effective", None),
        (DOWN, "unreachable", "refused"),
        (FOREIGN, "unreachable", "TLS"),
    ]
    assert (
        answers[0]["answer"]["tls"] is True and answers[0]["answer"]["nputrace"]
    )  # single-host --json's keys
    assert cluster.dyno("--hosts", f"{A},{C}", "status").returncode == 0
    none = cluster.dyno("--hosts", f"{DOWN},nohost.invalid", "status")
    assert none.returncode == 3 and none.stderr.startswith("dyno: no host could be reached")


def test_hostfile_and_slurm_job_name_the_same_hosts(cluster: Cluster, tmp_path: Path):
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text(f"# the two trainers\n{A}\n{B}  # rank 1\n")
    by_file = cluster.dyno("--hostfile", str(hostfile), "processes")
    slurm = {
        "PATH": f"{SLURM_STAND_IN}:{os.environ['PATH']}",
        "STAND_IN_SLURM_JOBS": json.dumps({"731244": ["127.0.0.[2-3]"]}),
    }
    by_job = cluster.dyno("--slurm-job", "731244", "processes", env=slurm)
    for result in (by_file, by_job):
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].startswith("HOST       PID ")
        assert rows_of(result.stdout, A)[0][1] == str(cluster.jobs[A].pid)
        assert rows_of(result.stdout, B)[0][1] == str(cluster.jobs[B].pid)
        assert result.stdout.splitlines()[-1] == "2 hosts: 2 effective, 0 ineffective, 0 unreachable"


def test_nputrace_wait_follows_every_hosts_trace_and_lists_every_file(cluster: Cluster, tmp_path: Path):
    result = cluster.dyno(
        "--json", "--hosts", f"{A},{B},{C}",
        "nputrace", "--start-step", "-1", "--iterations", "2", "--log-file", str(tmp_path), "--wait",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    answers = {a["host"]: a for a in json.loads(result.stdout)}
    assert answers[C]["state"] == "ineffective" and "no process is registered" in answers[C]["why"]
    for host in (A, B):
        assert answers[host]["state"] == "effective"
        trace = answers[host]["answer"]["trace"]
        (process,) = trace["processes"]
        assert process["pid"] == cluster.jobs[host].pid and process["phase"] == "TRACE_PHASE_FINISHED"
        assert process["files"] and all(Path(f).is_file() for f in process["files"])
    # Trace ids are each daemon's own: asked everywhere, the daemon that has it answers.
    trace_id = answers[A]["answer"]["trace_id"]
    shown = cluster.dyno("--hosts", f"{A},{B}", "trace", trace_id)
    assert shown.returncode == 1
    assert rows_of(shown.stdout, A)[0][1:4] == [str(cluster.jobs[A].pid), "0", "finished"]
    assert answers[A]["answer"]["trace"]["processes"][0]["files"][0] in shown.stdout
    assert f"{B}  ineffective: dynolog at {B}:{cluster.port} answered NOT_FOUND" in shown.stdout
    # Without an id, each host lists its own recent traces, their ids first: one table, a HOST column.
    listed = cluster.dyno("--hosts", f"{A},{B}", "trace")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for host in (A, B):
        trace_id = answers[host]["answer"]["trace_id"]
        assert rows_of(listed.stdout, host)[0][1:3] == [trace_id, "nputrace"], listed.stdout


def test_sync_starts_a_time_based_trace_at_one_instant_on_every_host(cluster: Cluster, tmp_path: Path):
    args = ("nputrace", "--duration-ms", "300", "--log-file", str(tmp_path), "--sync")
    answers = cluster.dyno_json("--hosts", f"{A},{B}", *args, "--wait")
    instants = {a["answer"]["profile_start_time_ms"] for a in answers}
    assert len(instants) == 1 and all(a["state"] == "effective" for a in answers), answers
    instant = instants.pop() / 1000
    for answer in answers:
        (process,) = answer["answer"]["trace"]["processes"]
        running = next(h["at"] for h in process["history"] if h["phase"] == "TRACE_PHASE_RUNNING")
        staged = next(h["at"] for h in process["history"] if h["phase"] == "TRACE_PHASE_STAGED")
        assert staged < instant <= running < instant + 2, (staged, instant, running)
    text = cluster.dyno("--hosts", C, *args)
    assert text.returncode == 1 and text.stdout.startswith("profile start time: ")
    step_based = cluster.dyno(
        "--hosts", C, "gputrace", "--iterations", "2", "--log-file", "/tmp/k.json", "--sync"
    )
    assert step_based.returncode == 2 and "lines up by step number" in step_based.stderr
    one_host = cluster.dyno("--hostname", C, "nputrace", "--log-file", "/tmp", "--sync")
    assert one_host.returncode == 2 and "--sync lines up a trace on many hosts" in one_host.stderr


def watch(cluster: Cluster, *args: str) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen(
        cluster.dyno.command(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_npu_monitor_start_watch_and_stop_across_hosts(cluster: Cluster, tmp_path: Path):
    start = cluster.dyno(
        "--hosts", f"{A},{B},{C}", "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1"
    )
    assert start.returncode == 1, start.stderr
    assert rows_of(start.stdout, A)[0][1:5] == ["effective", str(cluster.jobs[A].pid), "0", "triggered"]
    assert rows_of(start.stdout, B)[0][1:5] == ["effective", str(cluster.jobs[B].pid), "1", "triggered"]
    assert rows_of(start.stdout, C)[0][1] == "ineffective"
    try:
        streaming = watch(cluster, "--json", "--hosts", f"{A},{B}", "npu-monitor", "--watch")
        try:
            reporters = set()
            while reporters != {(A, cluster.jobs[A].pid), (B, cluster.jobs[B].pid)}:
                report = json.loads(read_line_until(streaming, "{", timeout=60))
                reporters.add((report["host"], report["pid"]))
        finally:
            stop_process(streaming, signal.SIGINT)

        extra = cluster.start(EXTRA)  # a host whose daemon restarts while watched
        cluster.train(EXTRA, 2)
        started = cluster.dyno(
            "--hostname", EXTRA, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1"
        )
        assert started.returncode == 0, started.stdout + started.stderr
        live = watch(cluster, "--hosts", f"{A},{B},{EXTRA}", "npu-monitor", "--watch")
        try:
            read_line_until(live, "npu-monitor — 3 process(es) on 3 of 3 host(s)", timeout=60)
            extra.stop()
            dropped = read_line_until(live, f"{EXTRA}: dropped out at ", timeout=60)
            assert "trying again in 1 s" in dropped, dropped
            assert "on 2 of 3 host(s)" in read_line_until(live, "npu-monitor — ", timeout=60)
            extra.start()  # the job registers again and reports on; the watch opens the stream again
            read_line_until(live, "npu-monitor — 3 process(es) on 3 of 3 host(s)", timeout=90)
        finally:
            stop_process(live, signal.SIGINT)
    finally:
        stop = cluster.dyno("--hosts", f"{A},{B}", "npu-monitor", "--npu-monitor-stop")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    monitors = cluster.dyno_json("--hosts", f"{A},{B}", "npu-monitor", "--status")
    assert [(m["host"], [p["pid"] for p in m["answer"]]) for m in monitors] == [
        (A, [cluster.jobs[A].pid]),
        (B, [cluster.jobs[B].pid]),
    ]


def test_a_host_may_name_its_daemons_port(cluster: Cluster):
    """Two daemons on one address, told apart by the port each entry names; the others use --port."""
    other = cluster.start(C, own_port=True)
    try:
        answers = cluster.dyno_json("--hosts", f"{C},{C}:{other.port},{A}:{other.port}", "status")
    finally:
        other.cleanup()
        del cluster.daemons[f"{C}-own-port"]
    assert [(a["host"], a["state"], a.get("reason")) for a in answers] == [
        (C, "effective", None),
        (f"{C}:{other.port}", "effective", None),
        (f"{A}:{other.port}", "unreachable", "refused"),
    ]


@pytest.mark.parametrize("entry", ["node1:http", "node1:0", "node1:65536", "node[1-2]:"])
def test_a_bad_port_in_a_host_list_is_a_usage_error_naming_it(entry: str):
    result = dyno("--hosts", entry, "status")
    assert result.returncode == 2
    assert "the port after ':' must be a number from 1 to 65535" in result.stderr
    assert entry.replace("[1-2]", "1") in result.stderr, result.stderr


def test_commands_that_work_with_one_daemon_refuse_hosts(tmp_path: Path):
    """Refused before anything connects: no daemon is needed to see it."""
    for args in (
        ("dynamic", "--pid", "1"),
        ("certs", "init", str(tmp_path / "pki"), "--server-hosts", A, "--client-name", "me"),
    ):
        result = dyno("--hosts", f"{A},{B}", *args)
        assert result.returncode == 2 and not (tmp_path / "pki").exists(), result.stderr
        assert (
            "works with one daemon (or none): --hosts, --hostfile and --slurm-job do not apply"
            in result.stderr
        )


def test_hostname_and_hosts_together_are_a_usage_error_naming_both():
    """Which one would win is not for the user to guess: refused before anything connects."""
    result = dyno("--hostname", "node009", "--hosts", f"{A},{B}", "status")
    assert result.returncode == 2
    assert "--hostname node009 and --hosts/--hostfile/--slurm-job both name the hosts" in result.stderr
