"""npu-monitor --auto-trace: how fast a slowdown is found, how often steady noise alarms, what it costs.

Recorded steady state: a real CPU PyTorch training loop monitors itself with the torch backend
(``tests/workloads/monitor_loop.py``, Kernel/API/Marker, 1 s reports) for ``--record-s`` seconds. Each
name's per-call times over those reports are its real noise; streams of any length are drawn from them
(each interval picks one recorded report at random, all names together, so the noise shared between
names is kept).

* **Detection delay**: 40 steady intervals, then one of the three largest Kernel names (the operators
  that matter, each with its own noise) is made 10 %, 25 % or 50 % slower; intervals from the first
  slow one to the incident, with the default ``for=3`` and a threshold of half the slowdown
  (``slowdown=5%`` to catch 10 %), over ``--trials`` streams. The floor is ``for`` itself.
* **False alarms per 10 000 intervals** of steady stream, at each of those thresholds.
* **Daemon CPU per report**, detection off against on: the recorded reports through the daemon's own
  IPC dispatch (reassembly, publishing, detection) and no sink, the Prometheus sink, or every sink,
  CPU time per report, best of 5 rounds each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional

from _bench import REPO, Figure, clean_env, report
from dynolog.incidents.detector import Detector, Settings, Who
from monitor_daemon import hello
from msmonitor_contract import wire
from msmonitor_contract.activity import Kind
from msmonitor_contract.kinds.npumonitor import AUTO_TRACE, NPUMONITOR
from msmonitor_contract.report import Report

SLOWDOWNS = (0.10, 0.25, 0.50)
# The daemon's configurations measured: its floor, the Kubernetes deployment's, and every sink on.
SINKS = {
    "none": "dispatch only",
    "prometheus": "dispatch + Prometheus sink",
    "all": "dispatch + Prometheus, TensorBoard and JSONL sinks",
}
FOR = 3
STEADY_BEFORE = 40
WHO = Who(1, 1, 0, 1, "bench")


def record(seconds: float) -> List[Report]:
    """Reports of a real training loop monitoring itself, 1 s apart."""
    keys = [
        "NPU_MONITOR_START=true",
        "NPU_MONITOR_STOP=false",
        "REPORT_INTERVAL_S=1",
        f"DURATION={seconds}",
        "MSPTI_ACTIVITY_KIND=Kernel,API,Marker",
        "NPU_MONITOR_LOG_FILE=",
        "NPU_MONITOR_EXPORT_TYPE=DB",
    ]
    env = clean_env(PYTHONPATH=str(REPO / "plugin"))
    out = subprocess.run(
        [sys.executable, str(REPO / "tests" / "workloads" / "monitor_loop.py"), *keys],
        env=env, capture_output=True, text=True, timeout=seconds + 120, check=True,
    )  # fmt: skip
    reports = [
        Report.from_dict(json.loads(line[len("report ") :]))
        for line in out.stdout.splitlines()
        if line.startswith("report ")
    ]
    return [r for r in reports if r.kinds and not r.final][2:]  # the first two: warm-up


def recording(path: Optional[Path], seconds: float) -> List[Report]:
    if path is not None and path.exists():
        return [Report.from_dict(json.loads(line)) for line in path.read_text().splitlines()]
    reports = record(seconds)
    if path is not None:
        path.write_text("".join(r.to_json() + "\n" for r in reports))
    return reports


def victims(reports: List[Report], count: int = 3) -> List[str]:
    """The largest Kernel names of the recording: the operators that matter, each with its own noise."""
    return [n.name for n in reports[-1].find(Kind.KERNEL)[0].top[:count]]


def slowed(base: Report, name: str, factor: float, seq: int) -> Report:
    """*base* renumbered, with *name*'s Kernel time scaled by *factor*."""
    copy = Report.from_dict(base.to_dict())
    copy.seq = seq
    for ks in copy.find(Kind.KERNEL):
        for n in ks.top:
            if n.name == name:
                n.total_ns = int(n.total_ns * factor)
    return copy


class Slowdown(NamedTuple):
    """Operator *name* takes *factor* times as long from report *since* on."""

    since: int
    name: str
    factor: float


STEADY = Slowdown(0, "", 1.0)


def stream(reports: List[Report], rng: random.Random, n: int, slowdown: Slowdown) -> Iterator[Report]:
    for seq in range(1, n + 1):
        factor = slowdown.factor if seq >= slowdown.since else 1.0
        yield slowed(rng.choice(reports), slowdown.name, factor, seq)


def delay(reports: List[Report], name: str, slowdown: float, threshold: float, seed: int) -> Optional[int]:
    detector, rng = Detector(Settings()), random.Random(seed)
    start = Settings().warmup + STEADY_BEFORE
    for r in stream(reports, rng, start + 60, Slowdown(start, name, 1 + slowdown)):
        found = detector.observe(WHO, r, threshold, FOR)
        if found is not None and r.seq >= start and any(f.key.name == name for f in found.findings):
            return r.seq - start + 1
    return None


def false_alarms(reports: List[Report], threshold: float, for_intervals: int, intervals: int) -> int:
    detector, rng = Detector(Settings()), random.Random(1)
    steady = stream(reports, rng, intervals, STEADY)
    return sum(detector.observe(WHO, r, threshold, for_intervals) is not None for r in steady)


def cpu_per_report_us(reports: List[Report], detection: bool, sinks: str, rounds: int = 5) -> float:
    """CPU µs per report through the daemon's IPC dispatch and its *sinks* (see :data:`SINKS`), best of
    *rounds*; each round drains the sink thread."""
    return min(asyncio.run(_one_round(reports, detection, sinks)) for _ in range(rounds))


async def _one_round(reports: List[Report], detection: bool, sinks: str, repeat: int = 20) -> float:
    from dynolog.ipc.dispatch import IpcDispatcher
    from dynolog.ipc.endpoint import Sender
    from dynolog.monitoring.sinks import Sinks
    from dynolog.node import Node

    class Endpoint:  # replies go nowhere
        def send(self, data: bytes, address: Any) -> bool:
            return True

    folder = Path(tempfile.mkdtemp(prefix="bench-incidents-"))
    node = Node.build(60.0, Sinks(_sinks(sinks, folder)))
    ipc = IpcDispatcher(node, [os.getuid()])
    me = Sender("/nonexistent", os.getpid(), os.getuid())
    ipc.dispatch(Endpoint(), wire.encode(wire.HELLO, hello(0).to_payload()), me)  # type: ignore[arg-type]
    if detection:  # a threshold no steady report reaches: what is measured is the judging
        rule = AUTO_TRACE.model(slowdown=10, for_intervals=FOR, iterations=1, max_per_day=1)
        node.npumonitor.settings[os.getpid()] = NPUMONITOR.model(start=True, auto_trace=rule)
    datagrams = [
        wire.encode(wire.METRICS, chunk)
        for i in range(repeat)
        for seq, r in enumerate(reports, i * len(reports) + 1)
        for chunk in slowed(r, "", 1, seq).to_chunks()
    ]
    t0 = time.process_time()
    for data in datagrams:
        ipc.dispatch(Endpoint(), data, me)  # type: ignore[arg-type]
    node.close()  # the sink thread's queue is written before it returns
    spent = time.process_time() - t0
    shutil.rmtree(folder)
    return spent / (repeat * len(reports)) * 1e6


def _sinks(which: str, folder: Path) -> List[Any]:
    from dynolog.monitoring.sinks.jsonl import JsonlSink
    from dynolog.monitoring.sinks.prometheus import PrometheusSink
    from dynolog.monitoring.sinks.tensorboard import TensorBoardSink

    if which == "none":
        return []
    if which == "prometheus":
        return [PrometheusSink(port=None)]
    return [PrometheusSink(port=None), TensorBoardSink(folder / "tensorboard"), JsonlSink(folder / "m.jsonl")]


def median(values: List[int]) -> float:
    ordered = sorted(values)
    return float(ordered[len(ordered) // 2]) if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record-s", type=float, default=40.0, help="seconds of steady reports to record")
    parser.add_argument("--trials", type=int, default=200, help="streams per slowdown")
    parser.add_argument(
        "--intervals", type=int, default=100_000, help="steady intervals for the false alarms"
    )
    parser.add_argument(
        "--recording",
        type=Path,
        help="a JSONL file of reports: read if it exists, else recorded into (to compare detectors "
        "on the same data)",
    )
    parser.add_argument("--no-cpu", action="store_true", help="detection figures only")
    args = parser.parse_args()
    reports = recording(args.recording, args.record_s)
    names = victims(reports)
    figures: List[Figure] = []
    details: Dict[str, Any] = {"recorded_reports": len(reports), "victims": names}
    for name in names:
        for s in SLOWDOWNS:
            delays = [delay(reports, name, s, s / 2, seed) for seed in range(args.trials)]
            found = [d for d in delays if d is not None]
            label = f"{name} {s:.0%} slower (slowdown={s / 2:.1%}, for={FOR})"
            figures.append(
                Figure(f"detection delay, {label}, median", median(found), "intervals", f"<= {FOR + 1}")
            )
            figures.append(
                Figure(f"detected within 60 intervals, {label}", 100 * len(found) / len(delays), "%")
            )
            details[f"delays_{name}_{s}"] = delays
    for for_intervals in (FOR, 8):
        alarms = false_alarms(reports, 0.25, for_intervals, args.intervals)
        per_10k = alarms * 10_000 / args.intervals
        figures.append(
            Figure(f"false alarms, slowdown=25%, for={for_intervals}", per_10k, "per 10k intervals")
        )
    for sinks, where in ({} if args.no_cpu else SINKS).items():
        off, on = (cpu_per_report_us(reports, d, sinks) for d in (False, True))
        figures += [
            Figure(f"daemon CPU per report, {where}, detection off", off, "us"),
            Figure(f"daemon CPU per report, {where}, detection on", on, "us"),
            Figure(f"extra CPU with detection, {where}", 100 * (on - off) / off, "%", "<= 10"),
        ]
    notes = [
        f"{len(reports)} steady reports recorded from a real CPU PyTorch loop (torch backend)",
        f"the slowed names, one at a time: the largest Kernel names, {', '.join(names)}",
        "delay counts the first slow interval as 1: the floor is for=3",
        "steady streams: each interval one recorded report drawn at random (all names together)",
    ]
    report("incidents", figures, notes, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
