"""What MindIE's analyser (``ms_service_profiler.parse``, 26.0) derives from a recording's marks, without
pandas: one typed row per line of its ``request.csv``, ``batch.csv``, ``forward.csv``, ``kvcache.csv``
and ``request_status.csv``, by the same marker names and rules. Each row type's fields carry their CSV
column names (:func:`columns`).

Its units are kept, the odd ones included: times are microseconds in its data frames; ``request.csv``'s
``start_time(ms)`` and ``execution_time(ms)`` are whole milliseconds (floored); ``batch.csv``'s
``start_time(ms)`` and ``end_time(ms)`` hold microseconds (it renames the column without converting);
datetimes are Asia/Shanghai wall time (its fixed choice), ``%Y-%m-%d %H:%M:%S:%f``.

The tables are derived per request (:mod:`.request_tables`: ``request.csv``, ``request_status.csv``)
and per engine iteration (:mod:`.engine_tables`: ``batch.csv``, ``forward.csv``, ``kvcache.csv``), in
the analyser's units (:mod:`.units`); this module holds what they share: the marker names, a row's
columns and cells, and how a mark's batch type and attributes are read.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Dict, List, Sequence

from .model import Mark, Process, Recording

Cell = Any  # a CSV cell: a number, a string, or "" (missing)
RESPONSE_NAMES = ("httpRes", "DecodeEnd", "sendResponse", "outputSync")
BATCH_EXEC_NAMES = ("modelExec", "modelRunnerExec", "Execute", "specDecoding")
SCHEDULE_NAMES = ("BatchSchedule", "batchFrameworkProcessing")
KVCACHE_DOMAINS = ("KVCache", "Schedule.KVCache")
# The spans the analyser follows a request's iterations through (processor_req.parse_batch).
BATCH_SPAN_NAMES = (*SCHEDULE_NAMES, *BATCH_EXEC_NAMES, "preprocess", "forward")
BATCH_TYPES = {0: "Prefill", 1: "Decode", 2: "Extend", 3: "Mixed", 5: "Dummy"}  # MindIE's batchType
KV_STATUS_COLUMNS = ("total_blocks", "used_blocks", "free_blocks", "kvcache_usage_rate")
QUEUES = ("WAITING", "RUNNING", "SWAPPED")  # request_status.csv's columns, in order


def columns(row_type: type, names: str = "COLUMNS") -> List[str]:
    """A row type's CSV header (and its view's in profiler.db): its fields, under the names in its
    ``COLUMNS`` where those differ; with *names* ``TABLE_COLUMNS``, its profiler.db table's (the analyser
    renames some columns before writing the table, the rest in the view)."""
    renamed: Dict[str, str] = getattr(row_type, names, {})
    return [renamed.get(f.name, f.name) for f in fields(row_type)]


def cells(row: Any) -> List[Cell]:
    return [getattr(row, f.name) for f in fields(row)]


def request_paths(marks: Sequence[Mark]) -> Dict[str, List[Mark]]:
    """Per request id, every mark that carries it (alone or in a batch's list) in time order: the flows
    the analyser draws; a request seen once has none."""
    stops: Dict[str, List[Mark]] = {}
    for mark in marks:
        for rid in mark.request_ids:
            if rid:
                stops.setdefault(rid, []).append(mark)
    return {rid: sorted(path, key=lambda m: m.start_ns) for rid, path in stops.items() if len(path) > 1}


def flow_phase(i: int, length: int) -> str:
    return "s" if i == 0 else "f" if i == length - 1 else "t"


def batch_name(marks: Sequence[Mark]) -> str:
    """The schedule span's name: MindIE's BatchSchedule, else vLLM's batchFrameworkProcessing."""
    return "BatchSchedule" if any(m.name == "BatchSchedule" for m in marks) else "batchFrameworkProcessing"


def batch_type(mark: Mark) -> Cell:
    """As given (``batch_type``, or MindIE's ``batchType`` code), else from the members' iterations:
    all 0 Prefill, all later Decode, both "Prefill, Decode" (plugin_trace.py)."""
    given = mark.attrs.get("batch_type")
    if given is not None:
        return given
    if "batchType" in mark.attrs:
        return BATCH_TYPES.get(mark.attrs["batchType"], "Other")
    iterations = [i for _, i in mark.members if i is not None]
    prefill, decode = 0 in iterations, any(i > 0 for i in iterations)
    return {(True, True): "Prefill, Decode", (True, False): "Prefill", (False, True): "Decode"}.get(
        (prefill, decode), ""
    )


def attr(mark: Mark, name: str) -> Cell:
    value = mark.attrs.get(name, mark.attrs.get(f"{name}="))
    return "" if value is None else value


def dp_ranks(recording: Recording) -> Dict[Process, Cell]:
    """Each process's data-parallel rank, from its ``dpRankId`` meta (``add_meta_info``)."""
    return {p: values["dpRankId"] for p, values in recording.meta.items() if "dpRankId" in values}
