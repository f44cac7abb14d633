"""``batch.csv``, ``forward.csv`` and ``kvcache.csv`` as the analyser derives them: what the engine did
per iteration — its batches (each schedule span and the spans until the next), its forward passes and
the KV cache's blocks."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Dict, List, Sequence, Tuple

from .analysis import (
    BATCH_EXEC_NAMES,
    BATCH_SPAN_NAMES,
    KV_STATUS_COLUMNS,
    KVCACHE_DOMAINS,
    SCHEDULE_NAMES,
    Cell,
    attr,
    batch_name,
    batch_type,
    columns,
    dp_ranks,
)
from .model import SPAN, Mark, Recording
from .units import ms, ms_between, np_round, us, when


@dataclass
class Batch:
    """A batch as the analyser numbers them (from 1: each schedule span starts the next): its schedule
    span, and the spans of its recording until the next schedule span (schedule, execution, forward)."""

    number: int
    schedule: Mark
    spans: List[Mark]


def batches(recording: Recording) -> List[Batch]:
    found: List[Batch] = []
    current: Dict[str, Batch] = {}  # recording -> the batch its spans belong to now
    for m in recording.marks:
        if m.name in SCHEDULE_NAMES:
            current[m.prof_id] = Batch(len(found) + 1, m, [])
            found.append(current[m.prof_id])
        if m.name in BATCH_SPAN_NAMES and m.prof_id in current:
            current[m.prof_id].spans.append(m)
    return found


# --- batch.csv ----------------------------------------------------------------------------------------


@dataclass
class BatchRow:
    TABLE_COLUMNS: ClassVar[Dict[str, str]] = {"start_time": "start_time(ms)", "end_time": "end_time(ms)"}
    COLUMNS: ClassVar[Dict[str, str]] = {
        "during_time": "during_time(ms)",
        "start_time": "start_time(ms)",
        "end_time": "end_time(ms)",
    }
    name: str
    res_list: str
    start_datetime: str
    end_datetime: str
    during_time: float
    batch_type: Cell
    prof_id: str
    batch_size: Cell
    kv: Dict[str, Cell]  # the KVCacheStatus columns, when the recording has them
    prefill_batch_size: int
    decode_batch_size: int
    prefill_scheduled_tokens: float
    decode_scheduled_tokens: float
    total_scheduled_tokens: float
    dp_rank: Cell
    start_time: float
    end_time: float


def _scheduled(res: Any) -> Tuple[int, int, float, float]:
    """Prefill and decode requests of a batch, and their scheduled tokens (``type`` 0 prefill, else
    ``iter`` 0 prefill; anything else decode, as the analyser counts)."""
    counts = [0, 0]
    tokens: List[float] = [0, 0]
    for item in res if isinstance(res, list) else []:
        if isinstance(item, dict):
            kind = item.get("type", 0 if item.get("iter", -1) == 0 else 1)
            if kind in (0, 1):
                counts[kind] += 1
                tokens[kind] += _number(
                    item.get("num_scheduled_tokens", item.get("num_scheduled_tokens=", 0))
                )
    return counts[0], counts[1], tokens[0], tokens[1]


def _number(value: Any) -> float:
    """A number as given (an int stays one, as in the analyser's sums); text parsed; else 0."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0


class _KvStatus:
    """KVCacheStatus marks per recording, to match each schedule span with the nearest in time."""

    def __init__(self, marks: Sequence[Mark]) -> None:
        self.by_prof: Dict[str, List[Mark]] = {}
        for mark in sorted(marks, key=lambda m: m.start_ns):
            if mark.name == "KVCacheStatus" and any(attr(mark, c) != "" for c in KV_STATUS_COLUMNS):
                self.by_prof.setdefault(mark.prof_id, []).append(mark)

    def nearest(self, mark: Mark) -> Dict[str, Cell]:
        found = self.by_prof.get(mark.prof_id)
        if not self or not found or mark.name not in SCHEDULE_NAMES:
            return {c: 0 for c in KV_STATUS_COLUMNS} if self else {}
        times = [m.start_ns for m in found]
        i = bisect.bisect_left(times, mark.start_ns)
        near = min(found[max(i - 1, 0) : i + 1], key=lambda m: abs(m.start_ns - mark.start_ns))
        return {c: attr(near, c) or 0 for c in KV_STATUS_COLUMNS}

    def __bool__(self) -> bool:
        return bool(self.by_prof)


def batch_rows(recording: Recording) -> List[BatchRow]:
    names = (*BATCH_EXEC_NAMES, batch_name(recording.marks))
    kv = _KvStatus(recording.marks)
    ranks = dp_ranks(recording)
    rows = []
    for mark in recording.marks:
        if mark.name not in names:
            continue
        prefill, decode, prefill_tokens, decode_tokens = _scheduled(mark.rid)
        rows.append(
            BatchRow(
                name=mark.name,
                res_list=str(mark.rid) if isinstance(mark.rid, list) else str(mark.rid or ""),
                start_datetime=when(mark.start_ns),
                end_datetime=when(mark.end_ns),
                during_time=ms_between(mark.start_ns, mark.end_ns),
                batch_type=batch_type(mark),
                prof_id=mark.prof_id,
                batch_size=float(len(mark.members)),  # the analyser counts the res list
                kv=kv.nearest(mark),
                prefill_batch_size=prefill,
                decode_batch_size=decode,
                prefill_scheduled_tokens=prefill_tokens,
                decode_scheduled_tokens=decode_tokens,
                total_scheduled_tokens=prefill_tokens + decode_tokens,
                dp_rank=ranks.get(mark.process, ""),
                start_time=us(mark.start_ns),
                end_time=us(mark.end_ns),
            )
        )
    return rows


def batch_columns(rows: Sequence[BatchRow], names: str = "COLUMNS") -> List[str]:
    """batch.csv's header (or its table's, as :func:`columns`): the KVCacheStatus columns only where the
    recording has them."""
    kv = list(rows[0].kv) if rows else []
    return [c for name in columns(BatchRow, names) for c in (kv if name == "kv" else [name])]


def batch_cells(row: BatchRow) -> List[Cell]:
    return [c for f in fields(row) for c in (row.kv.values() if f.name == "kv" else [getattr(row, f.name)])]


# --- forward.csv --------------------------------------------------------------------------------------


@dataclass
class ForwardRow:
    COLUMNS: ClassVar[Dict[str, str]] = {
        "relative_start_time": "relative_start_time(ms)",
        "during_time": "during_time(ms)",
        "bubble_time": "bubble_time(ms)",
        "start_time": "start_time(ms)",
        "end_time": "end_time(ms)",
    }
    name: str
    relative_start_time: float
    start_datetime: str
    end_datetime: str
    during_time: float
    bubble_time: Cell
    batch_size: Cell
    batch_type: Cell
    forward_iter: int
    dp_rank: Cell
    prof_id: str
    hostname: str
    start_time: float
    end_time: float


def typed_forwards(recording: Recording) -> List[Tuple[Mark, Cell]]:
    """The ``forward`` spans the analyser keeps, each with its batch type (get_batch_info): where every
    forward and schedule span has a type, all of them with their own; else only those whose requests
    (their ids joined) a schedule span names too, each with the type of the latest such span before it
    (its own before the first)."""
    schedule = batch_name(recording.marks)
    spans = [m for m in recording.marks if (m.name == "forward" and m.kind == SPAN) or m.name == schedule]
    if all(batch_type(m) != "" for m in spans):
        return [(m, batch_type(m)) for m in spans if m.name == "forward"]
    scheduled = {",".join(m.request_ids) for m in spans if m.name == schedule}
    latest: Dict[str, Cell] = {}
    kept = []
    for m in spans:
        requests = ",".join(m.request_ids)
        if m.name == schedule:
            latest[requests] = batch_type(m)
        elif requests in scheduled:
            kept.append((m, latest.get(requests, batch_type(m))))
    return kept


def forward_rows(recording: Recording) -> List[ForwardRow]:
    """Each kept ``forward`` span, numbered per recording, with the gap to the next one of the same
    recording (``bubble_time``; none after the last) and its start relative to the host's first
    (milliseconds); ``dp_rank`` only where the span or its process's meta names one (``dp_rank``: the
    analyser reads no ``dpRankId`` here)."""
    if not any(m.name == batch_name(recording.marks) for m in recording.marks):
        return []
    forwards = typed_forwards(recording)
    host_start: Dict[str, int] = {}
    by_prof: Dict[str, List[Tuple[Mark, Cell]]] = {}
    for m, kind in forwards:
        host_start[m.process.host] = min(host_start.get(m.process.host, m.start_ns), m.start_ns)
        by_prof.setdefault(m.prof_id, []).append((m, kind))
    rows = []
    for prof_id, marks in by_prof.items():
        for i, (m, kind) in enumerate(marks):
            following = marks[i + 1][0] if i + 1 < len(marks) else None
            meta = recording.meta.get(m.process, {})
            rows.append(
                ForwardRow(
                    name=m.name,
                    # differences of its millisecond columns, which round otherwise at a tie
                    relative_start_time=np_round(ms(m.start_ns) - ms(host_start[m.process.host]), 2),
                    start_datetime=when(m.start_ns),
                    end_datetime=when(m.end_ns),
                    during_time=ms_between(m.start_ns, m.end_ns),
                    bubble_time=np_round(ms(following.start_ns) - ms(m.end_ns), 2) if following else "",
                    batch_size=str(len(m.members)),
                    batch_type=kind,
                    forward_iter=i + 1,
                    dp_rank=attr(m, "dp_rank") if attr(m, "dp_rank") != "" else meta.get("dp_rank", ""),
                    prof_id=prof_id,
                    hostname=meta.get("hostname", m.process.host),
                    start_time=ms(m.start_ns),
                    end_time=ms(m.end_ns),
                )
            )
    return sorted(rows, key=lambda r: r.start_time)


# --- kvcache.csv --------------------------------------------------------------------------------------


@dataclass
class KvBlockRow:
    """MindIE's block actions (Allocate, AppendSlot, Free with ``deviceBlock``)."""

    COLUMNS: ClassVar[Dict[str, str]] = {"start_datetime": "start_time"}
    rid: str
    name: str
    start_datetime: str
    device_kvcache_left: Cell
    kvcache_usage_rate: float


@dataclass
class KvStatusRow:
    """vLLM's ``KVCacheStatus`` samples."""

    COLUMNS: ClassVar[Dict[str, str]] = {"start_datetime": "start_time"}
    name: str
    start_datetime: str
    total_blocks: Cell
    used_blocks: Cell
    free_blocks: Cell
    blocks_allocated: Cell
    blocks_freed: Cell
    kvcache_usage_rate: Cell


def kvcache_rows(recording: Recording, whole_seconds: bool) -> List[Any]:
    """The KV-cache rows; with *whole_seconds*, their times cut to the second, as the analyser cuts them
    whenever it writes profiler.db too (it cuts the table's, and the CSV is written from the same rows)."""
    form = "%Y-%m-%d %H:%M:%S" if whole_seconds else "%Y-%m-%d %H:%M:%S:%f"
    marks = [m for m in recording.marks if m.domain in KVCACHE_DOMAINS and m.name != "CacheHitRate"]
    if any(m.name in ("Allocate", "AppendSlot") and m.metric("deviceBlock") is not None for m in marks):
        return _block_rows(marks, form)
    return [
        KvStatusRow(m.name, when(m.start_ns, form), *(attr(m, c) for c in columns(KvStatusRow)[2:]))
        for m in marks
    ]


def _block_rows(marks: Sequence[Mark], form: str) -> List[Any]:
    """Usage is (the most free blocks ever reported - those left) / that most, for block actions."""
    most_free = max((m.metric("deviceBlock") or 0 for m in marks if m.name == "Free"), default=0)
    rows = []
    for m in marks:
        left = m.metric("deviceBlock")
        acts = m.name in ("Allocate", "AppendSlot", "Free") and most_free > 0 and left is not None
        rid = ",".join(m.request_ids)
        rate = (most_free - (left or 0)) / most_free if acts else 0
        rows.append(KvBlockRow(rid, m.name, when(m.start_ns, form), "" if left is None else left, rate))
    return rows
