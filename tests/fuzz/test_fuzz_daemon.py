"""A real daemon under fuzzed input: its IPC flooded from other processes while a plugin process keeps
heartbeating and `dyno` keeps asking, hypothesis-made datagrams and gRPC requests of every RPC.

Whatever arrives, the daemon answers within a deadline, counts every datagram exactly once
(received == handled + malformed + rejected_senders), and every RPC ends with a proper status: OK, or
INVALID_ARGUMENT naming the flag, or NOT_FOUND for an unknown trace — never UNKNOWN or INTERNAL.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import grpc
import pytest
from fuzz_strategies import (
    DYNAMIC,
    GPU_TRACE,
    NPU_MONITOR,
    NPU_TRACE,
    UNSAFE,
    datagrams,
    messages,
    mostly,
    scaled,
    tricky_text,
    well_framed,
)
from hypothesis import given
from hypothesis import strategies as st

from dynolog.edge.rpc import convert
from dynolog.kinds import command_policies
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, Workload, wait_until
from msmonitor_contract import kinds, wire
from msmonitor_contract.kinds import GPUTRACE, NPUMONITOR, NPUTRACE
from msmonitor_contract.rules import FieldError
from msmonitor_contract.targets import check as check_targets

FLOOD = Path(__file__).resolve().parent / "flood.py"
NOBODY = 65534
# A status or process listing takes well under 100 ms on an idle daemon; this is what "never stalls"
# means on two shared cores while another process sends as fast as the daemon reads.
DEADLINE_S = 2.0
KEEPALIVE_S = "6"  # the plugin heartbeats every 2 s; three lost heartbeats in a row would drop it


def stub_for(daemon: Daemon) -> Tuple[grpc.Channel, pb_grpc.DynologStub]:
    channel = grpc.insecure_channel(f"127.0.0.1:{daemon.port}")
    return channel, pb_grpc.DynologStub(channel)


def counted(ipc: pb.IpcCounters) -> bool:
    return ipc.received == ipc.handled + ipc.malformed + ipc.rejected_senders


# --- the flood ------------------------------------------------------------------------------------


def _flooder(daemon: Daemon, seconds: float, seed: int, as_uid: Optional[int] = None) -> subprocess.Popen:  # type: ignore[type-arg]
    cmd = [sys.executable, str(FLOOD), str(daemon.socket_dir), "--seconds", str(seconds), "--seed", str(seed)]
    if as_uid is not None:
        cmd += ["--as-uid", str(as_uid)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _summary(proc: subprocess.Popen) -> Dict[str, Any]:  # type: ignore[type-arg]
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"flooder exited {proc.returncode}: {out}\n{err}"
    return json.loads(out)  # type: ignore[no-any-return]


def test_a_flood_of_fuzzed_datagrams_is_counted_while_everyone_else_is_served(
    start_daemon: Callable[..., Daemon], start_workload: Callable[..., Workload]
) -> None:
    daemon = start_daemon("--process-keepalive-s", KEEPALIVE_S)
    plugin = start_workload("idle.py", daemon.client_env(), "--init")
    wait_until(lambda: daemon.process(plugin.pid), what="the plugin process registered")
    channel, stub = stub_for(daemon)
    flooders: List[subprocess.Popen] = []  # type: ignore[type-arg]
    try:
        before = stub.GetStatus(pb.GetStatusRequest(), timeout=DEADLINE_S).ipc
        flooders.append(_flooder(daemon, seconds=4, seed=12))
        if os.geteuid() == 0:  # a sender of another uid, rejected on the kernel's word
            flooders.append(_flooder(daemon, seconds=2, seed=13, as_uid=NOBODY))
        latencies: List[float] = []
        cli: List[Tuple[str, float]] = []
        while any(f.poll() is None for f in flooders):
            t0 = time.monotonic()
            status = stub.GetStatus(pb.GetStatusRequest(), timeout=DEADLINE_S)
            processes = stub.ListProcesses(pb.ListProcessesRequest(), timeout=DEADLINE_S).processes
            latencies.append(time.monotonic() - t0)
            assert counted(status.ipc), status.ipc
            registered = {p.pid: p for p in processes}
            assert plugin.pid in registered, "the plugin process was forgotten during the flood"
            assert registered[plugin.pid].last_seen_s < float(KEEPALIVE_S)
            if len(cli) < 2 * len(latencies) // 10 + 1:  # the CLI too, now and then: it starts slower
                command = ("status", "processes")[len(cli) % 2]
                t0 = time.monotonic()
                result = daemon.dyno(command, timeout=30)
                assert result.returncode == 0, result.stderr
                cli.append((command, time.monotonic() - t0))
        summaries = [_summary(f) for f in flooders]
        sent = sum(s["sent"] for s in summaries)

        # Every datagram a flooder sent was read, and ended in exactly one counter.
        def settled() -> Optional[pb.IpcCounters]:
            ipc = stub.GetStatus(pb.GetStatusRequest(), timeout=DEADLINE_S).ipc
            return ipc if ipc.received - before.received >= sent else None

        after = wait_until(settled, what="every flooded datagram read")
        assert counted(after), after
        delta = {
            k: getattr(after, k) - getattr(before, k)
            for k in ("received", "handled", "malformed", "rejected_senders", "replied", "send_errors")
        }
        report = {
            "flooders": summaries,
            "daemon": delta,
            "rate_per_s": round(summaries[0]["sent"] / summaries[0]["seconds"]),
            "rpc_probes": len(latencies),
            "slowest_probe_s": round(max(latencies), 3),
            "cli": cli,
        }
        print("flood:", json.dumps(report))
        assert delta["malformed"] >= summaries[0]["known_bad"], report
        assert delta["handled"] > 0, "valid datagrams in the flood were handled"
        if len(summaries) > 1:  # all of its datagrams but those too big to read whole: malformed first
            assert delta["rejected_senders"] >= summaries[1]["sent"] - summaries[1]["oversize"], report
        assert summaries[0]["sent"] > 500, report  # a flood even on a loaded machine
        text = daemon.dyno("status", timeout=30).stdout
        assert "handled" in text and "malformed" in text, text
        assert daemon.process(plugin.pid) is not None
    finally:
        for f in flooders:
            if f.poll() is None:
                f.kill()
                f.communicate(timeout=30)
        channel.close()


# --- hypothesis against one live daemon ---------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Daemon, pb_grpc.DynologStub, Path]]:
    """One daemon (traces only under a temporary root) with a plugin process, for many examples."""
    root = tmp_path_factory.mktemp("traces")
    daemon = Daemon(tmp_path_factory.mktemp("daemon"), ("--trace-root", str(root)))
    workload: Optional[Workload] = None
    channel: Optional[grpc.Channel] = None
    try:
        daemon.start()
        workload = Workload("idle.py", daemon.client_env(), ("--init",)).start()
        wait_until(lambda: daemon.process(workload.pid), what="the plugin process registered")  # type: ignore[union-attr]
        channel, stub = stub_for(daemon)
        yield daemon, stub, root
    finally:
        if channel is not None:
            channel.close()
        if workload is not None:
            workload.stop()
        daemon.cleanup()


class Peer:
    """Two sockets of this test process: one bound, whose replies are read and must parse, and one
    unbound (the kernel autobinds it; its replies go unread). Sends wait, with a deadline, while the
    daemon's queue is full."""

    def __init__(self, daemon: Daemon) -> None:
        self.target = str(daemon.socket_dir / wire.DAEMON_ENDPOINT)
        self.bound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.bound.bind(f"\0mm-fuzz-{os.getpid()}")
        self.unbound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        for sock in (self.bound, self.unbound):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * wire.MAX_DATAGRAM)
            sock.settimeout(DEADLINE_S)

    def send(self, data: bytes, bound: bool) -> None:
        (self.bound if bound else self.unbound).sendto(data, self.target)
        self.drain()  # its replies must not fill our queue

    def drain(self) -> None:
        while select.select([self.bound], [], [], 0)[0]:
            wire.decode(self.bound.recv(wire.MAX_DATAGRAM))  # what the daemon sends back parses

    def close(self) -> None:
        self.bound.close()
        self.unbound.close()


# --- random gRPC requests -----------------------------------------------------------------------------

# Live sessions attach to nothing (pids above the kernel's pid_max, or invalid ones): holding a process
# would make a start or stop wait for it, by design. Their launch wait is bounded; the rest is random.
LIVE_DYNAMIC = {
    **DYNAMIC,
    "attach.targets.pids": st.lists(
        mostly(st.integers(2**22 + 1, 2**31 - 1), st.integers(-5, 0)), max_size=3
    ),
    "attach.wait_registration_s": mostly(st.floats(0, 0.2), st.floats(max_value=-1e-9)),
}
UNARY: List[Tuple[str, st.SearchStrategy[Any], Optional[Callable[[Any], List[FieldError]]]]] = [
    ("GetStatus", messages(pb.GetStatusRequest), None),
    ("GetVersion", messages(pb.GetVersionRequest), None),
    ("ListProcesses", messages(pb.ListProcessesRequest), None),
    ("NpuTrace", messages(pb.NpuTraceRequest, NPU_TRACE) | messages(pb.NpuTraceRequest), NPUTRACE.check),
    ("GpuTrace", messages(pb.GpuTraceRequest, GPU_TRACE) | messages(pb.GpuTraceRequest), GPUTRACE.check),
    (
        "NpuMonitor",
        messages(pb.NpuMonitorRequest, NPU_MONITOR) | messages(pb.NpuMonitorRequest),
        NPUMONITOR.check,
    ),
    ("GetTrace", messages(pb.GetTraceRequest), None),
]
PROPER = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}


def _outcome(call: Callable[[], Any]) -> Tuple[grpc.StatusCode, str]:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def _check(rpc: str, request: Any, errors: List[FieldError], code: grpc.StatusCode, details: str) -> None:
    assert code in PROPER, f"{rpc} answered {code.name}: {details}\n{request}"
    if errors:
        assert code == grpc.StatusCode.INVALID_ARGUMENT, f"{rpc} accepted what validation refuses: {errors}"
        for error in errors:
            assert str(error) in details
    elif code == grpc.StatusCode.INVALID_ARGUMENT:
        assert "--trace-root" in details or "dynamic session begins with an attach" in details, details


@pytest.mark.parametrize(("rpc", "requests", "check"), UNARY, ids=[u[0] for u in UNARY])
@scaled(15)
@given(data=st.data())
def test_random_unary_requests_get_a_proper_status(
    live: Any, rpc: str, requests: st.SearchStrategy[Any], check: Any, data: Any
) -> None:
    daemon, stub, root = live
    request = data.draw(requests)
    if data.draw(st.booleans()) and hasattr(request, "log_file") and request.log_file.startswith("/tmp/fuzz"):
        request.log_file = str(root) + request.log_file[len("/tmp/fuzz") :]  # inside the trace root
    code, details = _outcome(lambda: getattr(stub, rpc)(request, timeout=10))
    _check(rpc, request, check(_as_the_daemon_reads(rpc, request)) if check else [], code, details)
    assert daemon.proc.poll() is None


def _as_the_daemon_reads(rpc: str, request: Any) -> Any:
    """A command kind's request as the daemon validates it: its model (floats as typed, not as float32
    prints them), so the messages compared are the daemon's own."""
    return convert.command(MODELS[rpc], request) if rpc in MODELS else request


MODELS = {policy.rpc: policy for policy in command_policies()}


# Every RPC that takes an output path, with a request that is valid but for that path.
PATHS: List[Tuple[str, Callable[[str], Any], Callable[[Any], List[FieldError]]]] = [
    (
        "NpuTrace",
        lambda p: pb.NpuTraceRequest(log_file=p, activities=["CPU"], duration_ms=1),
        NPUTRACE.check,
    ),
    ("GpuTrace", lambda p: pb.GpuTraceRequest(log_file=p, duration_ms=1), GPUTRACE.check),
    ("NpuMonitor", lambda p: pb.NpuMonitorRequest(log_file=p), NPUMONITOR.check),
]


@scaled(30)
@given(
    st.sampled_from(PATHS),
    st.sampled_from(["", "/..", "/tmp", "/tmp/fuzz/", "relative/"]),
    st.text(st.sampled_from([*UNSAFE, *"a/. "]), max_size=6) | tricky_text,
)
def test_output_paths_of_any_text_get_a_proper_status(live: Any, rpc: Any, head: str, tail: str) -> None:
    """Under --trace-root the daemon resolves the path on its filesystem: any text must survive that."""
    _, stub, root = live
    name, build, check = rpc
    request = build((str(root) if head == "/tmp/fuzz/" else head) + "/" + tail)
    code, details = _outcome(lambda: getattr(stub, name)(request, timeout=10))
    _check(name, request, check(request), code, details)


@scaled(15)
@given(st.lists(messages(pb.DynamicRequest, LIVE_DYNAMIC), min_size=0, max_size=4))
def test_random_dynamic_sessions_get_a_proper_status(live: Any, requests: List[pb.DynamicRequest]) -> None:
    _, stub, root = live
    for r in requests:
        if r.attach.output.startswith("/tmp/fuzz"):
            r.attach.output = str(root) + r.attach.output[len("/tmp/fuzz") :]
    code, details = _outcome(lambda: list(stub.Dynamic(iter(requests), timeout=10)))
    first = requests[0] if requests else None
    errors = kinds.DYNAMIC.check(first.attach) if first and first.action == pb.DYNAMIC_ACTION_ATTACH else []
    _check("Dynamic", first, errors, code, details)


@scaled(5)
@given(messages(pb.GetTraceRequest), messages(pb.WatchMetricsRequest))
def test_random_watches_get_a_proper_status(
    live: Any, trace: pb.GetTraceRequest, metrics: pb.WatchMetricsRequest
) -> None:
    _, stub, _ = live
    code, details = _outcome(lambda: list(stub.WatchTrace(trace, timeout=5)))
    assert code in PROPER, f"WatchTrace answered {code.name}: {details}"
    # A metrics watch streams until the client leaves: the deadline is ours, not a failure; targets that
    # validation refuses are refused, naming each problem.
    code, details = _outcome(lambda: list(stub.WatchMetrics(metrics, timeout=0.2)))
    errors = check_targets(metrics)
    expected = (
        {grpc.StatusCode.INVALID_ARGUMENT}
        if errors
        else {grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED}
    )
    assert code in expected, f"WatchMetrics: {code.name} {details}"
    assert all(str(error) in details for error in errors), details


# Last: datagrams can register this test process, which never answers a command it is sent.
@scaled(25)
@given(st.lists(st.tuples(datagrams | well_framed(), st.booleans()), min_size=1, max_size=20))
def test_hypothesis_datagrams_against_the_live_daemon(live: Any, batch: List[Tuple[bytes, bool]]) -> None:
    daemon, stub, _ = live
    before = stub.GetStatus(pb.GetStatusRequest(), timeout=DEADLINE_S).ipc
    peer = Peer(daemon)
    try:
        for data, bound in batch:
            peer.send(data, bound)

        def read_all() -> Optional[pb.IpcCounters]:
            ipc = stub.GetStatus(pb.GetStatusRequest(), timeout=DEADLINE_S).ipc
            return ipc if ipc.received - before.received >= len(batch) else None

        after = wait_until(read_all, timeout=10, what="the batch read")
        assert counted(after), after
        peer.drain()
    finally:
        peer.close()


def test_the_daemon_still_serves_after_the_fuzzing(live: Any) -> None:
    daemon, stub, _ = live
    status = stub.GetStatus(pb.GetStatusRequest(), timeout=DEADLINE_S)
    assert counted(status.ipc)
    assert daemon.dyno("processes", timeout=30).returncode == 0
