"""The JSON RPC of dynolog's and msMonitor's ``dyno`` binaries, against the real daemon on its one port:
their exact request bytes in, replies each CLI parses out, real jobs traced, and hostile input refused
without harm to gRPC clients on the same port."""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import struct
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import grpc
import pytest

import legacy_cli as cli
from dynolog import __version__
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, Workload, wait_until


def ask(daemon: Daemon, body: bytes) -> Dict[str, Any]:
    reply = cli.send(daemon.port, body)
    assert reply is not None, "the daemon closed without answering"
    return json.loads(reply)  # type: ignore[no-any-return]


@contextlib.contextmanager
def stub(daemon: Daemon) -> Iterator[pb_grpc.DynologStub]:
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        yield pb_grpc.DynologStub(channel)


def process(daemon: Daemon, pid: int) -> Optional[pb.ProcessInfo]:
    with stub(daemon) as s:
        found = s.ListProcesses(pb.ListProcessesRequest(), timeout=10).processes
    return next((p for p in found if p.pid == pid), None)


def test_status_and_version_answer_both_clis_beside_grpc(daemon: Daemon) -> None:
    status = ask(daemon, cli.STATUS)
    # dynolog's dyno prints the body; msMonitor's reads its step and states from the same answer.
    assert status == {
        "current_step": 0,
        "npumonitor": "Uninitialized",
        "nputrace": "Uninitialized",
        "status": 1,
    }
    assert ask(daemon, cli.VERSION) == {"version": __version__}
    with stub(daemon) as s:
        assert s.GetStatus(pb.GetStatusRequest(), timeout=10).version == __version__


def test_a_command_without_processes_says_why_and_still_carries_what_the_stock_cli_unwraps(
    daemon: Daemon,
) -> None:
    reply = ask(daemon, cli.set_config(cli.stock_gputrace("/tmp/x.json", iterations=2)))
    assert reply["processesMatched"] == [] and reply["commandStatus"] == "ineffective"
    assert "no process is registered" in reply["message"]


@pytest.mark.parametrize(
    "log_file, why",
    [
        ("/elsewhere/t.json", "outside the --trace-root"),
        ("/tmp/a\\b.json", "control character"),  # unescaped by the CLI: JSON reads a backspace
        ("relative.json", "absolute path"),
    ],
)
def test_a_bad_output_path_is_refused_in_words(start_daemon, tmp_path: Path, log_file: str, why: str) -> None:
    daemon = start_daemon("--trace-root", str(tmp_path))
    reply = ask(daemon, cli.set_config(cli.stock_gputrace(log_file)))
    assert reply["commandStatus"] == "ineffective" and reply["processesMatched"] == []
    assert why in reply["message"], reply
    ask(daemon, cli.set_config(cli.stock_gputrace(log_file)))  # again: refused again, logged once
    assert (
        daemon.log_file.read_text().count(f"legacy gputrace from 127.0.0.1 refused: {reply['message']}") == 1
    )


def raw_exchange(port: int, data: bytes, shut: bool = True) -> bytes:
    """Send *data* (then close the writing side) and read until the daemon closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        if shut:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while piece := sock.recv(65536):
            chunks.append(piece)
        return b"".join(chunks)


@pytest.mark.parametrize(
    "data",
    [
        struct.pack("=i", 0),
        struct.pack("=i", -1),
        struct.pack("=i", 8192) + b"{" * 8192,  # msMonitor's daemon refuses 8192 and above too
        cli.frame(b"\xff\xfe"),
        cli.frame(b"[" * 5000 + b"]" * 3000),
        cli.frame(b'"just a string"'),
        cli.frame(b'{"fn":"dcgmProfResume"}'),
        cli.frame(cli.set_config(cli.stock_gputrace('/tmp/a"b.json'))),
        struct.pack("=i", 100) + b"{}",  # a half-open sender: fewer bytes than it announced, then EOF
    ],
    ids=["zero", "negative", "over-cap", "utf8", "nesting", "non-object", "unknown-fn", "bad-json", "short"],
)
def test_what_the_cpp_daemons_close_on_is_closed_without_a_word(daemon: Daemon, data: bytes) -> None:
    assert raw_exchange(daemon.port, data) == b""
    assert ask(daemon, cli.STATUS)["status"] == 1
    if data[:4] != struct.pack("=i", 100):  # a short sender is not malformed: it went away
        assert "a legacy request from 127.0.0.1 was closed without an answer" in daemon.log_file.read_text()


def test_a_slow_sender_is_timed_out(daemon: Daemon) -> None:
    # Two bytes of a length, then nothing, the connection left open: the daemon closes it (after 3 s).
    assert raw_exchange(daemon.port, b"\x12\x00", shut=False) == b""


def test_a_flood_of_legacy_connections_leaves_grpc_clients_served(daemon: Daemon) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    flood = min(2000, hard - 200)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, flood + 200), hard))
    sockets: List[socket.socket] = []
    try:
        for i in range(flood):  # silent ones, and ones that announce a body and never send it
            sock = socket.create_connection(("127.0.0.1", daemon.port), timeout=30)
            if i % 2:
                sock.sendall(struct.pack("=i", 4000))
            sockets.append(sock)
        with stub(daemon) as s:
            for _ in range(20):
                assert s.GetStatus(pb.GetStatusRequest(), timeout=20).version == __version__
        assert ask(daemon, cli.STATUS)["status"] == 1
    finally:
        for sock in sockets:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_connections_over_the_legacy_rate_are_closed_unread(start_daemon) -> None:
    daemon = start_daemon("--legacy-connection-rate", "0.01", "--legacy-connection-burst", "2")
    assert [cli.send(daemon.port, cli.STATUS) is not None for _ in range(3)] == [True, True, False]
    with stub(daemon) as s:  # gRPC on the same port is another allowance
        assert s.GetStatus(pb.GetStatusRequest(), timeout=10).version == __version__
    wait_until(lambda: "(--legacy-connection-rate, --legacy-connection-burst)" in daemon.log_file.read_text())


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 on this machine")
def test_an_ipv6_port_serves_both(start_daemon) -> None:
    daemon = start_daemon("--listen-address", "::1")
    reply = cli.send(daemon.port, cli.STATUS, host="::1")
    assert reply is not None and json.loads(reply)["status"] == 1
    with grpc.insecure_channel(f"[::1]:{daemon.port}") as channel:
        assert (
            pb_grpc.DynologStub(channel).GetStatus(pb.GetStatusRequest(), timeout=10).version == __version__
        )


def test_legacy_rpc_off_serves_grpc_alone(start_daemon) -> None:
    daemon = start_daemon("--legacy-rpc=off")
    with stub(daemon) as s:
        assert s.GetStatus(pb.GetStatusRequest(), timeout=10).version == __version__
    # gRPC alone answers with its HTTP/2 SETTINGS frame (type 4), what a stock dyno misreads as a length.
    assert raw_exchange(daemon.port, cli.frame(cli.STATUS))[3] == 4


# --- real jobs ---------------------------------------------------------------------------------------


def registered(daemon: Daemon, job: Workload) -> pb.ProcessInfo:
    return wait_until(lambda: process(daemon, job.pid), what=f"process {job.pid} to register")


def trace_done(daemon: Daemon, trace_id: str) -> pb.TraceInfo:
    with stub(daemon) as s:
        for info in s.WatchTrace(pb.GetTraceRequest(trace_id=trace_id), timeout=120):
            last = info
    assert last.done, last
    return last


@pytest.mark.torch
def test_msmonitor_nputrace_traces_a_plugin_job_at_its_steps(
    start_daemon, start_workload, tmp_path: Path
) -> None:
    daemon = start_daemon("--process-keepalive-s", "3")
    job = start_workload("train.py", daemon.plugin_env(RANK="0"))
    start = registered(daemon, job).current_step + 150
    reply = ask(daemon, cli.set_config(cli.msmonitor_nputrace(str(tmp_path), start, 2)))
    assert reply["commandStatus"] == "effective", reply
    assert reply["processesMatched"] == reply["activityProfilersTriggered"] == [job.pid]
    # msMonitor's status shows the trace waiting for its step, and its window, once the process took it.
    status = wait_until(lambda: (s := ask(daemon, cli.STATUS))["nputrace"] == "Ready" and s, what="Ready")
    assert (status["start_step"], status["stop_step"]) == (start, start + 2)
    trace = trace_done(daemon, reply["traceId"])
    process_trace = trace.processes[0]
    assert (process_trace.start_step, process_trace.stop_step) == (start, start + 2)
    assert Path(process_trace.output).parent == tmp_path
    # The daemon's log names the trace, for `dyno trace ID` on a trace a legacy dyno started.
    assert (
        f"legacy nputrace from 127.0.0.1: nputrace {reply['traceId']} sent to 1 of 1"
        in daemon.log_file.read_text()
    )


@pytest.mark.torch
def test_msmonitor_npu_monitor_starts_and_stops_a_plugin_jobs_monitor(daemon: Daemon, start_workload) -> None:
    job = start_workload("train.py", daemon.plugin_env(RANK="0"))
    registered(daemon, job)
    started = ask(daemon, cli.set_config(cli.msmonitor_npu_monitor(True, interval_s=1)))
    assert started["commandStatus"] == "effective", started
    wait_until(lambda: ask(daemon, cli.STATUS)["npumonitor"] == "Running", what="the monitor to run")
    # The exclusion holds on this wire too: no nputrace while the monitor runs.
    refused = ask(daemon, cli.set_config(cli.msmonitor_nputrace("/tmp", -1, 1)))
    assert (
        refused["commandStatus"] == "ineffective"
        and refused["outcomes"][0]["status"] == "npu_monitor_running"
    )
    stopped = ask(daemon, cli.set_config(cli.msmonitor_npu_monitor(False, True, old=True)))
    assert stopped["commandStatus"] == "effective", stopped
    wait_until(lambda: ask(daemon, cli.STATUS)["npumonitor"] == "Idle", what="the monitor to stop")


@pytest.mark.torch
def test_stock_gputrace_traces_a_stock_kineto_job(start_daemon, start_workload, tmp_path: Path) -> None:
    daemon = start_daemon()
    job = start_workload("train.py", daemon.kineto_env())  # stock PyTorch, no plugin
    registered(daemon, job)
    log_file = tmp_path / "t.json"
    reply = ask(daemon, cli.set_config(cli.stock_gputrace(str(log_file), iterations=3), pids=str(job.pid)))
    assert reply["processesMatched"] == [job.pid] and reply["activityProfilersBusy"] == 0, reply
    trace = trace_done(daemon, reply["traceId"])
    written = tmp_path / f"t_{job.pid}.json"  # where the stock dyno tells its user to look
    assert list(trace.processes[0].files) == [str(written)]
    assert json.loads(written.read_text())["trace_id"] == reply["traceId"]
