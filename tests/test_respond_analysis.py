"""The responder's CPU analysis, run as the responder runs it (a child interpreter with HTA), on traces
laid out to one question: is a rank that pauses between steps taken for the one that computes longest?

The paused rank arrives last at the all-reduce and waits least there, as a straggler does; counting
its pause as compute named it the slowest (an offline CI run of the respond test: a fast rank, steps
padded to 40 ms, began each step 30 ms after the slowed one). The traces are Kineto's format, read by
the real HolisticTraceAnalysis; the end-to-end measure on a real job is tests/test_respond.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Tuple

from dyno.respond.analysis import CPU, analyse

STEP_US = 40_000
STEPS = 2
# Per rank, within each step (µs from its start): (name, start, end) of its ops. The all-reduce ends
# at 34 ms on every rank, when the last (rank 0, back from its pause) has joined it.
PLAN: Dict[int, List[Tuple[str, int, int]]] = {
    0: [("aten::mm", 30_000, 33_000), ("gloo:all_reduce", 33_000, 34_000)],  # paused 30 ms
    1: [("aten::sort", 0, 25_000), ("gloo:all_reduce", 25_000, 34_000)],  # the slow one
    2: [("aten::mm", 0, 3_000), ("gloo:all_reduce", 3_000, 34_000)],
}


def write_trace(folder: Path, rank: int) -> None:
    events = []
    for step in range(STEPS):
        begin = 1_000_000 + step * STEP_US
        events.append(event(f"ProfilerStep#{100 + step}", "user_annotation", rank, begin, STEP_US))
        for name, start, end in PLAN[rank]:
            cat = "user_annotation" if name.startswith("gloo:") else "cpu_op"
            events.append(event(name, cat, rank, begin + start, end - start))
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [],
        "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": len(PLAN)},
        "traceEvents": events,
    }
    (folder / f"host_rank{rank}.pt.trace.json").write_text(json.dumps(doc))


def event(name: str, cat: str, rank: int, ts: int, dur: int) -> Dict[str, object]:
    pid = 4000 + rank
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": pid, "ts": ts, "dur": dur, "args": {}}


def test_a_rank_that_pauses_is_idle_not_the_slowest(tmp_path: Path) -> None:
    for rank in PLAN:
        write_trace(tmp_path, rank)

    found = analyse(str(tmp_path))

    assert (found.method, found.ranks_found, found.note) == (CPU, [0, 1, 2], ""), found
    assert found.slowest_rank == 1, found
    figures = {f.rank: (f.steps, f.step_ms, f.collective_ms, f.compute_ms, f.idle_ms) for f in found.per_rank}
    assert figures == {
        0: (STEPS, 40.0, 1.0, 3.0, 36.0),
        1: (STEPS, 40.0, 9.0, 25.0, 6.0),
        2: (STEPS, 40.0, 31.0, 3.0, 6.0),
    }, found
    assert [c["name"] for c in found.collectives] == ["gloo:all_reduce"], found
