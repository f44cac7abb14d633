"""Which rank held the job back, read from the collected rank set with HolisticTraceAnalysis (HTA).

HTA loads the folder as the job's ranks (``TraceAnalysis(trace_dir=…)``, each rank from its trace's
``distributedInfo``). On GPU traces with NCCL kernels, HTA's own straggler analysis names the rank
(``get_potential_stragglers``). On CPU traces (gloo; Ascend's CPU side) it has none, so the measure is
taken from HTA's frames: per rank and traced step, the time inside collectives (``c10d::``, ``gloo:``,
``nccl:``, ``hccl`` ops; overlapping ones counted once), the time some other op runs (its compute), and
the time no op runs at all (idle: a sleep, a wait the profiler does not see). In a collective, every
rank waits for the last to arrive: the slowest rank is the one with the most compute. Idle time is not
compute: a rank that pauses between steps would otherwise look busy, and, arriving last after its
pause, wait least.

HTA parses ranks in a forked pool, and forking a process that has gRPC threads can deadlock; it also
loads pandas and plotly. So it runs in a child interpreter (``python -m dyno.respond.analysis DIR``)
that prints one JSON object: the responder stays small, and a crash there is a note, not a loss.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

ANALYSE_TIMEOUT_S = 120.0
COLLECTIVE = re.compile(r"^(c10d::|gloo:|nccl:|ncclKernel|hccl|record_param_comms)", re.IGNORECASE)
STEP = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
TOP_COLLECTIVES = 5
STANDS_OUT = 1.25  # the slowest rank's compute over the median's below this: noise (the alert rule's ratio)
HTA, CPU, NONE = "hta-stragglers", "cpu-collectives", "none"


@dataclass
class RankFigures:
    rank: int
    steps: int
    step_ms: float  # per traced step, on average
    collective_ms: float
    compute_ms: float  # an op other than a collective runs
    idle_ms: float  # no op runs


@dataclass
class Analysis:
    method: str  # HTA, CPU or NONE
    ranks_found: List[int] = field(default_factory=list)
    slowest_rank: Optional[int] = None
    per_rank: List[RankFigures] = field(default_factory=list)
    collectives: List[Dict[str, Any]] = field(default_factory=list)  # the slowest rank's, by time
    note: str = ""

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def analyse(traces_dir: str, timeout: float = ANALYSE_TIMEOUT_S) -> Analysis:
    """The analysis of *traces_dir*, from a child interpreter; method ``none`` with a note when HTA is
    missing or fails."""
    command = [sys.executable, "-m", __name__, traces_dir]
    # A session of its own: HTA forks worker processes, and a timeout must stop them with the child.
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return Analysis(NONE, note=f"the analysis took over {timeout:.0f}s: stopped")
    lines = out.strip().splitlines()
    if child.returncode != 0 or not lines:
        tail = (err.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
        return Analysis(NONE, note=f"the analysis failed: {tail}")
    doc = json.loads(lines[-1])
    doc["per_rank"] = [RankFigures(**r) for r in doc["per_rank"]]
    return Analysis(**doc)


# --- the child ------------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    (traces_dir,) = argv
    print(json.dumps(_analysis(traces_dir).to_json()), flush=True)
    return 0


def _analysis(traces_dir: str) -> Analysis:
    try:
        from hta.trace_analysis import TraceAnalysis  # type: ignore[import-untyped]  # a test extra; no hints
    except ImportError:
        return Analysis(
            NONE, note="HolisticTraceAnalysis is not installed here: pip install HolisticTraceAnalysis"
        )
    analysis = TraceAnalysis(trace_dir=traces_dir, include_last_profiler_step=True)  # else it drops it
    trace = analysis.t
    names = trace.symbol_table.get_sym_table()
    ranks = sorted(int(r) for r in trace.get_ranks())
    figures, collectives = (
        zip(*(_rank(int(r), trace.get_trace(r), names) for r in ranks)) if ranks else ((), ())
    )
    per_rank = list(figures)
    found = Analysis(CPU, ranks, None, per_rank)
    if per_rank:
        slowest = max(per_rank, key=lambda f: f.compute_ms)
        found.slowest_rank = slowest.rank
        median = statistics.median(f.compute_ms for f in per_rank)
        if len(per_rank) > 1 and slowest.compute_ms < STANDS_OUT * median:
            found.note = (
                f"no rank stands out: the slowest's compute ({slowest.compute_ms:.1f} ms a step) is within "
                f"{STANDS_OUT - 1:.0%} of the median's ({median:.1f} ms)"
            )
    if any(_on_gpu(trace.get_trace(r), names) for r in ranks):
        try:
            found.slowest_rank = int(analysis.get_potential_stragglers(num_candidates=1)[0])
            found.method, found.note = HTA, ""  # HTA's own measure: the CPU one's note is not its
        except Exception as exc:  # HTA's straggler analysis has its own needs: say why, keep ours
            found.note = f"HTA's straggler analysis failed ({exc}); the CPU measure is shown"
    if found.slowest_rank is not None:
        found.collectives = collectives[ranks.index(found.slowest_rank)]
    return found


def _rank(rank: int, frame: Any, names: List[str]) -> Tuple[RankFigures, List[Dict[str, Any]]]:
    """One rank's figures, and its collectives by time per step."""
    cpu = frame[frame["stream"] < 0]
    named = cpu["name"].map(lambda i: names[i])
    is_step = named.str.match(STEP.pattern)
    steps = cpu[is_step]
    windows = _intervals(steps) or [_span(cpu)]
    comms = cpu[named.str.match(COLLECTIVE.pattern, case=False)]
    # A Python function's span (with_stack) covers its sleeps too: only ops and annotations are work.
    ops = cpu[~is_step & (cpu["cat"].map(lambda i: names[i]) != "python_function")]
    count = len(windows)
    step_us = sum(end - start for start, end in windows)
    collective_us = sum(_covered(_intervals(comms), start, end) for start, end in windows)
    busy_us = sum(_covered(_intervals(ops), start, end) for start, end in windows)
    by_name = comms.assign(n=named[comms.index]).groupby("n")["dur"].sum().sort_values(ascending=False)
    top = [
        {"rank": rank, "name": str(name), "ms_per_step": round(float(us) / count / 1000, 3)}
        for name, us in by_name.head(TOP_COLLECTIVES).items()
    ]
    figures = RankFigures(
        rank,
        count,
        round(step_us / count / 1000, 3),
        round(collective_us / count / 1000, 3),
        round((busy_us - collective_us) / count / 1000, 3),
        round((step_us - busy_us) / count / 1000, 3),
    )
    return figures, top


def _intervals(frame: Any) -> List[Tuple[float, float]]:
    return list(zip(frame["ts"], frame["ts"] + frame["dur"]))


def _span(frame: Any) -> Tuple[float, float]:
    return float(frame["ts"].min()), float((frame["ts"] + frame["dur"]).max())


def _covered(intervals: List[Tuple[float, float]], start: float, end: float) -> float:
    """Time within [start, end) that some interval covers, overlaps counted once."""
    covered, reach = 0.0, start
    for a, b in sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end):
        if b > reach:
            covered += b - max(a, reach)
            reach = b
    return covered


def _on_gpu(frame: Any, names: List[str]) -> bool:
    gpu = frame[frame["stream"] > 0]
    return bool(gpu["name"].map(lambda i: "nccl" in names[i].lower()).any())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
