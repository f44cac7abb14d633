"""The daemon's own footprint: CPU while idle, resident memory, and how fast ``dyno status`` answers.

* Idle CPU: a real ``dynolog`` with two registered plugin processes heartbeating (``MSMONITOR_USE_DAEMON=1``
  idle Python processes, default keep-alive), no ``dyno`` traffic. CPU is utime + stime of the whole
  process from ``/proc/<pid>/stat`` over the window, as % of one core (clock-tick resolution: 0.1 % over
  10 s); the on-CPU nanoseconds of all its threads from ``/proc/<pid>/task/*/schedstat`` cross-check it.
* Memory: ``VmRSS`` (now) and ``VmHWM`` (peak) from ``/proc/<pid>/status`` after the idle window.
* ``dyno status``: the real CLI as a user runs it (``dyno --port P status``: interpreter start, imports,
  channel, RPC, output), and the bare ``GetStatus`` RPC over one in-process gRPC channel.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import grpc

from _bench import (
    Daemon,
    Figure,
    Workload,
    clean_env,
    cpu_schedstat_s,
    cpu_seconds,
    proc_status,
    report,
    running_daemon,
    summarize_ns,
    wait_until,
)
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc

PLUGIN_PROCESSES = 2


def measure_idle(daemon: Daemon, seconds: float) -> Dict[str, float]:
    assert daemon.proc is not None
    pid = daemon.proc.pid
    received0 = daemon.dyno_json("status").get("ipc", {}).get("received", 0)
    time.sleep(1.0)  # let the daemon finish answering that dyno before the window opens
    t0, ticks0, sched0 = time.monotonic(), cpu_seconds(pid), cpu_schedstat_s(pid)
    time.sleep(seconds)
    t1, ticks1, sched1 = time.monotonic(), cpu_seconds(pid), cpu_schedstat_s(pid)
    received1 = daemon.dyno_json("status").get("ipc", {}).get("received", 0)
    elapsed = t1 - t0
    return {
        "seconds": elapsed,
        "cpu_pct": 100 * (ticks1 - ticks0) / elapsed,
        "cpu_pct_schedstat": 100 * (sched1 - sched0) / elapsed,
        "datagrams": received1 - received0,
        "threads": len(list(Path(f"/proc/{pid}/task").iterdir())),
    }


def time_dyno_cli(daemon: Daemon, runs: int, budget_s: float) -> List[int]:
    """Wall time of ``dyno --port P status`` as a user runs it, in nanoseconds."""
    cmd = [str(Path(sys.executable).parent / "dyno"), "--port", str(daemon.port), "status"]
    env = clean_env()
    samples: List[int] = []
    deadline = time.monotonic() + budget_s
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=30)
        samples.append(time.perf_counter_ns() - t0)
        if time.monotonic() > deadline:
            break
    return samples


def time_rpc(port: int, calls: int, budget_s: float) -> List[int]:
    """``GetStatus`` over one channel, call after call, in nanoseconds."""
    samples: List[int] = []
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.DynologStub(channel)
        for _ in range(20):  # connect and warm up
            stub.GetStatus(pb.GetStatusRequest(), timeout=10)
        deadline = time.monotonic() + budget_s
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            stub.GetStatus(pb.GetStatusRequest(), timeout=10)
            samples.append(time.perf_counter_ns() - t0)
            if time.monotonic() > deadline:
                break
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--cli-runs", type=int, default=20)
    parser.add_argument("--rpc-calls", type=int, default=500)
    args = parser.parse_args()

    workloads: List[Workload] = []
    with running_daemon() as daemon:
        try:
            assert daemon.proc is not None
            plugin_env = {"MSMONITOR_USE_DAEMON": "1", **daemon.client_env()}
            for _ in range(PLUGIN_PROCESSES):
                workloads.append(Workload("idle.py", plugin_env, ("--init",)).start())
            wait_until(
                lambda: len(daemon.processes()) >= PLUGIN_PROCESSES, 30, "the plugin processes to register"
            )
            idle = measure_idle(daemon, args.idle_seconds)
            memory = proc_status(daemon.proc.pid, ("VmRSS", "VmHWM"))
            cli = summarize_ns(time_dyno_cli(daemon, args.cli_runs, 30.0))
            rpc = summarize_ns(time_rpc(daemon.port, args.rpc_calls, 10.0))
            memory_after = proc_status(daemon.proc.pid, ("VmRSS", "VmHWM"))
        finally:
            for workload in workloads:
                workload.stop()

    figures = [
        Figure(
            f"idle CPU, {PLUGIN_PROCESSES} plugins heartbeating (utime+stime)",
            idle["cpu_pct"],
            "% core",
            "<= 0.5",
            "— (10 ms sleep loop: 100 wake-ups/s)",
        ),
        Figure("idle CPU, same window (schedstat)", idle["cpu_pct_schedstat"], "% core", "<= 0.5", "—"),
        Figure(
            "resident memory, idle (VmRSS)", memory["VmRSS"] / 1024, "MiB", "<= 60", "— (systemd cap 1 GiB)"
        ),
        Figure("resident memory, peak (VmHWM)", memory["VmHWM"] / 1024, "MiB", "", "—"),
        Figure("dyno status (CLI process): p50", cli["p50"] / 1e6, "ms", "", "— (Rust CLI, JSON over TCP)"),
        Figure("dyno status (CLI process): p99", cli["p99"] / 1e6, "ms", "", "—"),
        Figure("GetStatus RPC, in-process channel: p50", rpc["p50"] / 1e6, "ms", "", "—"),
        Figure("GetStatus RPC, in-process channel: p99", rpc["p99"] / 1e6, "ms", "", "—"),
    ]
    notes = [
        f"idle window {idle['seconds']:.1f} s: {idle['datagrams']} datagrams received (heartbeats), "
        f"{idle['threads']:.0f} daemon threads. utime+stime counts 10 ms clock ticks (0.1 % resolution "
        "over 10 s); schedstat counts nanoseconds on CPU.",
        f"memory after the dyno runs: VmRSS {memory_after['VmRSS'] / 1024:.1f} MiB, "
        f"VmHWM {memory_after['VmHWM'] / 1024:.1f} MiB.",
        f"dyno status: {cli['count']} runs, each a new interpreter (grpc and protobuf imports), "
        f"as a user sees it; GetStatus: {rpc['count']} calls on one warm channel.",
        "The C++ reference gives no measured idle CPU, RSS or status latency; its figures are design facts.",
    ]
    report(
        "daemon",
        figures,
        notes,
        {"idle": idle, "memory_kib": memory, "memory_after_kib": memory_after, "dyno_cli": cli, "rpc": rpc},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
