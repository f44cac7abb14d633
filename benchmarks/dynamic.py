"""``dyno dynamic`` (issue 10): start → first recorded event, stop → directory complete, attach → prompt.

Real processes: a ``dynolog`` on private sockets and the CPU PyTorch demo job (``tests/workloads/train.py``)
padded to 10 ms a step, with the plugin active.

1. Start → first recorded event. A session on a warm in-process gRPC channel (what ``dyno dynamic`` opens);
   ``t_send`` is ``time.time()`` just before the START request, after a random pause of up to one step so
   that starts land anywhere in a step. The first recorded event is the earliest complete event in the
   window's Chrome trace (``baseTimeNanoseconds`` + ``ts``): the profiler is running from there.
2. Stop → directory complete and answered: STOP sent → its answer, which comes only once every process
   reported the directory written (trace, summary, info.json); each window is 2 s long.
3. Attach → prompt: a real ``dyno --json dynamic --pid P`` process started → its attach answer on stdout,
   against ``dyno status``'s whole run (both include Python's start-up); medians of alternating rounds.
4. Hold released: a ``dyno dynamic`` holding the job is killed (SIGKILL: its connection closes) or
   frozen (SIGSTOP: the connection stays open, as when its host vanishes, and only the daemon's
   keepalive pings notice) → ``held_by`` is empty in ``ListProcesses``, polled every 10 ms.

msprof's dynamic mode needs CANN and an NPU, which this machine has not: there is no peer to run beside.
"""

from __future__ import annotations

import json
import queue
import random
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

import grpc

from _bench import Figure, Workload, percentile, report, running_daemon, stop_process, wait_until
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Dyno, read_line_until

WINDOWS = 12
WINDOW_S = 2.0
ATTACH_ROUNDS = 10
START_GOAL_MS, STOP_GOAL_S, ATTACH_GOAL, RELEASE_GOAL_S = 20, 1.0, 2.0, 5.0
PEER = "msprof: needs CANN + NPU"


class Session:
    """A ``Dynamic`` stream: requests in through a queue, answers read in order."""

    def __init__(self, stub: pb_grpc.DynologStub, attach: pb.DynamicAttach) -> None:
        self._requests: queue.Queue[Optional[pb.DynamicRequest]] = queue.Queue()
        self._replies = stub.Dynamic(self._feed())
        self._seq = 0
        assert self.send(pb.DYNAMIC_ACTION_ATTACH, attach).ok

    def _feed(self) -> Iterator[pb.DynamicRequest]:
        while (request := self._requests.get()) is not None:
            yield request

    def send(self, action: pb.DynamicAction, attach: Optional[pb.DynamicAttach] = None) -> pb.DynamicReply:
        self._seq += 1
        self._requests.put(pb.DynamicRequest(seq=self._seq, action=action, attach=attach))
        return next(self._replies)

    def close(self) -> None:
        self.send(pb.DYNAMIC_ACTION_QUIT)
        self._requests.put(None)


def first_event_s(directory: Path) -> float:
    (trace_file,) = directory.glob("*.pt.trace.json")
    trace = json.loads(trace_file.read_text())
    first_us = min(e["ts"] for e in trace["traceEvents"] if e.get("ph") == "X")
    return float(trace["baseTimeNanoseconds"] / 1e9 + first_us / 1e6)


def windows(stub: pb_grpc.DynologStub, pid: int, out: Path) -> tuple[List[float], List[float]]:
    attach = pb.DynamicAttach(
        targets=pb.Targets(pids=[pid]), output=str(out), options=pb.DynamicOptions(activities=["CPU"])
    )
    session = Session(stub, attach)
    start_ms, stop_s = [], []
    try:
        for _ in range(WINDOWS):
            time.sleep(random.uniform(0, 0.010))  # land anywhere in a 10 ms step
            t_send = time.time()
            started = session.send(pb.DYNAMIC_ACTION_START)
            assert started.ok, started.message
            time.sleep(WINDOW_S)
            t_stop = time.monotonic()
            stopped = session.send(pb.DYNAMIC_ACTION_STOP)
            stop_s.append(time.monotonic() - t_stop)
            (process,) = stopped.processes
            assert process.window.phase == pb.TRACE_PHASE_FINISHED, stopped.message
            start_ms.append((first_event_s(Path(process.window.output)) - t_send) * 1000)
    finally:
        session.close()
    return start_ms, stop_s


def attach_vs_status(port: int, pid: int, out: Path) -> tuple[List[float], List[float]]:
    dyno = Dyno(("--port", str(port)))
    attach_s, status_s = [], []
    for _ in range(ATTACH_ROUNDS):
        began = time.monotonic()
        subprocess.run(dyno.command("status"), check=True, capture_output=True)
        status_s.append(time.monotonic() - began)
        began = time.monotonic()
        proc = subprocess.Popen(
            dyno.command("--json", "dynamic", "--pid", str(pid), "--output", str(out)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        read_line_until(proc, "{")
        attach_s.append(time.monotonic() - began)
        assert proc.stdin is not None
        proc.stdin.write("quit\n")
        proc.stdin.close()
        proc.wait(30)
        stop_process(proc)
    return attach_s, status_s


def hold_released_s(stub: pb_grpc.DynologStub, port: int, pid: int, out: Path, sig: signal.Signals) -> float:
    proc = subprocess.Popen(
        Dyno(("--port", str(port))).command("--json", "dynamic", "--pid", str(pid), "--output", str(out)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        read_line_until(proc, "{")
        began = time.monotonic()
        proc.send_signal(sig)
        # Polling the daemon's answer is the measurement: every 10 ms, never backing off.
        wait_until(
            lambda: not any(p.held_by for p in stub.ListProcesses(pb.ListProcessesRequest()).processes),
            60,
            "the hold to be released",
            pause=0.01,
        )
        return time.monotonic() - began
    finally:
        proc.send_signal(signal.SIGCONT)
        stop_process(proc)


def main() -> int:
    with running_daemon("--process-keepalive-s", "3") as daemon, tempfile.TemporaryDirectory() as tmp:
        job = Workload("train.py", daemon.plugin_env(RANK="0"), ("--step-ms", "10")).start()
        try:
            daemon.wait_registered(job.pid)
            with grpc.insecure_channel(f"localhost:{daemon.port}") as channel:
                stub = pb_grpc.DynologStub(channel)
                start_ms, stop_s = windows(stub, job.pid, Path(tmp))
                released = {
                    sig: hold_released_s(stub, daemon.port, job.pid, Path(tmp), sig)
                    for sig in (signal.SIGKILL, signal.SIGSTOP)
                }
            attach_s, status_s = attach_vs_status(daemon.port, job.pid, Path(tmp))
        finally:
            job.stop()
    attach_ratio = percentile(attach_s, 50) / percentile(status_s, 50)
    figures = [
        Figure(
            "start -> first recorded event: p50", percentile(start_ms, 50), "ms", f"<= {START_GOAL_MS}", PEER
        ),
        Figure("start -> first recorded event: p90", percentile(start_ms, 90), "ms", "", PEER),
        Figure(
            f"stop -> directory answered ({WINDOW_S:g} s window): p50",
            percentile(stop_s, 50),
            "s",
            f"<= {STOP_GOAL_S}",
            PEER,
        ),
        Figure("stop -> directory answered: p90", percentile(stop_s, 90), "s", "", PEER),
        Figure("attach -> prompt: median", percentile(attach_s, 50) * 1000, "ms", "", "—"),
        Figure("dyno status: median", percentile(status_s, 50) * 1000, "ms", "", "—"),
        Figure("attach -> prompt / dyno status", attach_ratio, "x", f"<= {ATTACH_GOAL}", "—"),
        Figure(
            "hold released: controller killed",
            released[signal.SIGKILL],
            "s",
            f"<= {RELEASE_GOAL_S}",
            "msprof: second client hangs",
        ),
        Figure(
            "hold released: controller frozen",
            released[signal.SIGSTOP],
            "s",
            f"<= {RELEASE_GOAL_S}",
            "msprof: second client hangs",
        ),
    ]
    notes = [
        f"{WINDOWS} windows of {WINDOW_S:g} s on a 10 ms step loop; {ATTACH_ROUNDS} attach and status rounds",
        "start includes waiting for the next step boundary (0-10 ms) and torch.profiler's start",
    ]
    details = {
        "released_s": {sig.name: value for sig, value in released.items()},
        "start_ms": start_ms,
        "stop_s": stop_s,
        "attach_s": attach_s,
        "status_s": status_s,
    }
    report("dynamic", figures, notes, details)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
