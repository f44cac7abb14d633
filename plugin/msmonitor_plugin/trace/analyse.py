"""``--analyse``: a summary of a Chrome trace — per-step durations and the top operators by self and
total time — as JSON for machines and as a table for people. Works on any torch/Kineto trace file."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from msmonitor_contract.numbers import strict_int

STEP_PREFIX = "ProfilerStep#"
OPERATOR_CATEGORIES = {"cpu_op", "kernel", "gpu_op", "gpu_user_annotation"}
TOP = 20


@dataclass
class OperatorStats:
    name: str
    count: int = 0
    total_us: float = 0.0
    self_us: float = 0.0


@dataclass
class Summary:
    steps: List[Dict[str, float]] = field(default_factory=list)  # {"step": n, "duration_ms": d}
    top_by_self: List[OperatorStats] = field(default_factory=list)
    top_by_total: List[OperatorStats] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def to_table(self) -> str:
        lines = ["Steps", "  step  duration_ms"]
        lines += [f"  {int(s['step']):>4}  {s['duration_ms']:>11.3f}" for s in self.steps]
        for title, ops in (("self", self.top_by_self), ("total", self.top_by_total)):
            lines += [
                "",
                f"Top operators by {title} time",
                f"  {'self_ms':>9} {'total_ms':>9} {'calls':>6}  name",
            ]
            lines += [
                f"  {o.self_us / 1000:>9.3f} {o.total_us / 1000:>9.3f} {o.count:>6}  {o.name}" for o in ops
            ]
        return "\n".join(lines) + "\n"


def _step_number(event: Dict[str, Any]) -> Optional[int]:
    """The N of a ``ProfilerStep#N`` event; None for any other."""
    name = str(event.get("name", ""))
    return strict_int(name[len(STEP_PREFIX) :]) if name.startswith(STEP_PREFIX) else None


def summarise(events: Iterable[Dict[str, Any]], top: int = TOP) -> Summary:
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e]
    numbered = ((_step_number(e), e) for e in complete)
    steps = sorted(
        ({"step": step, "duration_ms": e["dur"] / 1000.0} for step, e in numbered if step is not None),
        key=lambda s: s["step"],
    )
    stats = _operator_stats([e for e in complete if e.get("cat") in OPERATOR_CATEGORIES])
    return Summary(
        steps=steps,
        top_by_self=sorted(stats, key=lambda s: -s.self_us)[:top],
        top_by_total=sorted(stats, key=lambda s: -s.total_us)[:top],
    )


def _operator_stats(events: List[Dict[str, Any]]) -> List[OperatorStats]:
    """Totals per name; self time subtracts the operators nested inside, thread by thread."""
    by_thread: Dict[Tuple[Any, Any], List[Dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    stats: Dict[str, OperatorStats] = {}
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: List[Tuple[Dict[str, Any], List[float]]] = []  # (event, [children time])
        for e in thread_events:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                _close(stats, *stack.pop())
            if stack:
                stack[-1][1][0] += e["dur"]
            stack.append((e, [0.0]))
        while stack:
            _close(stats, *stack.pop())
    return list(stats.values())


def _close(stats: Dict[str, OperatorStats], event: Dict[str, Any], children: List[float]) -> None:
    s = stats.setdefault(event["name"], OperatorStats(event["name"]))
    s.count += 1
    s.total_us += event["dur"]
    s.self_us += max(0.0, event["dur"] - children[0])


def analyse_file(trace_file: str, out_dir: str) -> List[str]:
    """Write ``summary.json`` and ``summary.txt`` beside *trace_file*; returns their paths."""
    with open(trace_file) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    summary = summarise(events)
    paths = [f"{out_dir}/summary.json", f"{out_dir}/summary.txt"]
    for path, text in zip(paths, (summary.to_json(), summary.to_table())):
        with open(path, "w") as f:
            f.write(text)
    return paths
