"""What MindIE's analyser (``ms_service_profiler.parse``, 26.0) derives from a recording's marks, without
pandas: one typed row per line of its ``request.csv``, ``batch.csv``, ``forward.csv``, ``kvcache.csv``
and ``request_status.csv``, by the same marker names and rules. Each row type's fields carry their CSV
column names (:func:`columns`).

Its units are kept, the odd ones included: times are microseconds in its data frames; ``request.csv``'s
``start_time(ms)`` and ``execution_time(ms)`` are whole milliseconds (floored); ``batch.csv``'s
``start_time(ms)`` and ``end_time(ms)`` hold microseconds (it renames the column without converting);
datetimes are Asia/Shanghai wall time (its fixed choice), ``%Y-%m-%d %H:%M:%S:%f``.
"""

from __future__ import annotations

import bisect
import datetime
import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .model import SPAN, Mark, Process, Recording, single_rid

Cell = Any  # a CSV cell: a number, a string, or "" (missing)
SHANGHAI = datetime.timezone(datetime.timedelta(hours=8))
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


def us(ns: int) -> float:
    """Microseconds as the analyser holds them: numpy divides an int64 column as float64, so the
    nanoseconds are rounded to a float first (its sums, differences and datetimes round the same way)."""
    return float(ns) / 1000


def np_round(value: float, digits: int) -> float:
    """Rounded as numpy and pandas round (scale, round half to even, scale back), which differs from
    Python's round() at a decimal 5 that binary holds a little above or below."""
    scale = 10**digits
    return round(value * scale) / scale


def np_sum(values: Sequence[float]) -> float:
    """Summed in numpy's order (pairwise: eight running sums over blocks of up to 128, halves above), so
    that a mean agrees with numpy's to the last bit."""
    n = len(values)
    if n < 8:
        return sum(values, 0.0)
    if n > 128:
        half = n // 2 - (n // 2) % 8
        return np_sum(values[:half]) + np_sum(values[half:])
    lanes = list(values[:8])
    whole = n - n % 8
    for i in range(8, whole, 8):
        for j in range(8):
            lanes[j] += values[i + j]
    total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
    return sum(values[whole:], total)


def np_mean(values: Sequence[float]) -> float:
    return np_sum(values) / len(values)


def ms(ns: int) -> float:
    """Milliseconds as the analyser's millisecond columns hold them: its microseconds over 1000."""
    return us(ns) / 1000


def ms_between(start_ns: int, end_ns: int) -> float:
    return (us(end_ns) - us(start_ns)) / 1000


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def when(ns: int, form: str = "%Y-%m-%d %H:%M:%S:%f") -> str:
    """The analyser's datetime: Shanghai time of the whole microsecond, microseconds after a colon."""
    moment = EPOCH + datetime.timedelta(microseconds=math.floor(us(ns)))
    return moment.astimezone(SHANGHAI).strftime(form)


def _first(values: Iterable[Optional[float]]) -> Cell:
    return next((v for v in values if v is not None), "")


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


# --- request.csv --------------------------------------------------------------------------------------


@dataclass
class RequestRow:
    TABLE_COLUMNS: ClassVar[Dict[str, str]] = {"start_time": "start_time(ms)"}
    COLUMNS: ClassVar[Dict[str, str]] = {
        "execution_time": "execution_time(ms)",
        "queue_wait_time": "queue_wait_time(ms)",
        "first_token_latency": "first_token_latency(ms)",
        "start_time": "start_time(ms)",
    }
    http_rid: str
    start_datetime: Cell
    recv_token_size: Cell
    reply_token_size: Cell
    execution_time: Cell
    queue_wait_time: Cell
    first_token_latency: Cell
    cache_hit_rate: Cell
    start_time: Cell


def _by_request(marks: Sequence[Mark]) -> Dict[str, List[Mark]]:
    found: Dict[str, List[Mark]] = {}
    for mark in marks:
        rid = single_rid(mark.rid)
        if rid and mark.domain not in ("KVCache", "PullKVCache") and mark.name != "forward":
            found.setdefault(rid, []).append(mark)
    return found


class _Spans:
    """Per request, the (start, end) microseconds of the marks a figure is taken over."""

    def __init__(self) -> None:
        self.by_rid: Dict[str, List[Tuple[float, float]]] = {}

    def add(self, rid: str, mark: Mark) -> None:
        self.by_rid.setdefault(rid, []).append((us(mark.start_ns), us(mark.end_ns)))


def first_token_spans(marks: Sequence[Mark]) -> Dict[str, Tuple[float, float]]:
    """Per request, from ``httpReq`` to the latest end of: its batch spans at iteration 0, its first
    ``detokenize``/``decode`` and its first ``sendResponse`` (calc_ttft), as (start, end) microseconds;
    only where there is one."""
    spans = _Spans()
    arrived: Set[str] = set()
    firsts: Set[Tuple[str, str]] = set()
    for m in marks:
        if m.name == "httpReq":
            arrived.update(m.request_ids)
            for rid in m.request_ids:
                spans.add(rid, m)
        elif m.name in BATCH_SPAN_NAMES:
            for rid, iteration in m.members:
                if iteration == 0:
                    spans.add(rid, m)
        elif m.name in ("detokenize", "decode", "sendResponse"):
            kind = "send" if m.name == "sendResponse" else "decode"
            for rid in m.request_ids:
                if (rid, kind) not in firsts:
                    firsts.add((rid, kind))
                    spans.add(rid, m)
    return {
        rid: (min(s for s, _ in points), max(e for _, e in points))
        for rid, points in spans.by_rid.items()
        if rid in arrived and len(points) > 1
    }


def first_token_ms(marks: Sequence[Mark]) -> Dict[str, float]:
    return {rid: (end - start) / 1000 for rid, (start, end) in first_token_spans(marks).items()}


def queue_wait_ms(marks: Sequence[Mark]) -> Dict[str, float]:
    """Per request, from its first ``Enqueue`` to its last ``Dequeue`` (calc_que_wait)."""
    enqueued, dequeued = _Spans(), _Spans()
    for m in marks:
        for rid in m.request_ids if m.name in ("Enqueue", "Dequeue") else ():
            (enqueued if m.name == "Enqueue" else dequeued).add(rid, m)
    return {
        rid: (max(e for _, e in dequeued.by_rid[rid]) - min(s for s, _ in points)) / 1000
        for rid, points in enqueued.by_rid.items()
        if rid in dequeued.by_rid
    }


def _or_zero(found: Dict[str, float], rid: str) -> Cell:
    """A request's figure; a missing one is 0, written as the analyser's column holds it (a float when
    any request has the figure, else an integer)."""
    return found.get(rid, 0.0 if found else 0)


def request_rows(recording: Recording) -> List[RequestRow]:
    first_token, queue_wait = first_token_ms(recording.marks), queue_wait_ms(recording.marks)
    rows = []
    for rid, marks in _by_request(recording.marks).items():
        arrived = next((m for m in marks if m.name == "httpReq"), None)
        answered = [m for m in marks if m.name in RESPONSE_NAMES]
        synced = sum(m.name == "outputSync" for m in answered)
        hit = next((m.attrs.get("hitCache", 0) for m in marks if m.name == "CacheHitRate"), "N/A")
        start = us(arrived.start_ns) if arrived else None
        ended = us(answered[-1].end_ns) if answered else None
        execution: Cell = ""
        if start is not None and ended is not None:
            execution = ended // 1000 - start // 1000
        rows.append(
            RequestRow(
                http_rid=rid,
                start_datetime=when(arrived.start_ns) if arrived else "",
                recv_token_size=_first(m.metric("recvTokenSize") for m in marks),
                reply_token_size=synced or _first(m.metric("replyTokenSize") for m in marks),
                execution_time=execution,
                queue_wait_time=_or_zero(queue_wait, rid),
                first_token_latency=_or_zero(first_token, rid),
                cache_hit_rate=hit,
                # whole milliseconds when the request has both ends, else left in microseconds (as it does)
                start_time="" if start is None else start // 1000 if execution != "" else start,
            )
        )
    return sorted(rows, key=lambda r: (r.start_time == "", r.start_time or 0))


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


def batch_name(marks: Sequence[Mark]) -> str:
    """The schedule span's name: MindIE's BatchSchedule, else vLLM's batchFrameworkProcessing."""
    return "BatchSchedule" if any(m.name == "BatchSchedule" for m in marks) else "batchFrameworkProcessing"


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


def _attr(mark: Mark, name: str) -> Cell:
    value = mark.attrs.get(name, mark.attrs.get(f"{name}="))
    return "" if value is None else value


class _KvStatus:
    """KVCacheStatus marks per recording, to match each schedule span with the nearest in time."""

    def __init__(self, marks: Sequence[Mark]) -> None:
        self.by_prof: Dict[str, List[Mark]] = {}
        for mark in sorted(marks, key=lambda m: m.start_ns):
            if mark.name == "KVCacheStatus" and any(_attr(mark, c) != "" for c in KV_STATUS_COLUMNS):
                self.by_prof.setdefault(mark.prof_id, []).append(mark)

    def nearest(self, mark: Mark) -> Dict[str, Cell]:
        found = self.by_prof.get(mark.prof_id)
        if not self or not found or mark.name not in SCHEDULE_NAMES:
            return {c: 0 for c in KV_STATUS_COLUMNS} if self else {}
        times = [m.start_ns for m in found]
        i = bisect.bisect_left(times, mark.start_ns)
        near = min(found[max(i - 1, 0) : i + 1], key=lambda m: abs(m.start_ns - mark.start_ns))
        return {c: _attr(near, c) or 0 for c in KV_STATUS_COLUMNS}

    def __bool__(self) -> bool:
        return bool(self.by_prof)


def dp_ranks(recording: Recording) -> Dict[Process, Cell]:
    """Each process's data-parallel rank, from its ``dpRankId`` meta (``add_meta_info``)."""
    return {p: values["dpRankId"] for p, values in recording.meta.items() if "dpRankId" in values}


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
                    dp_rank=_attr(m, "dp_rank") if _attr(m, "dp_rank") != "" else meta.get("dp_rank", ""),
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
        KvStatusRow(m.name, when(m.start_ns, form), *(_attr(m, c) for c in columns(KvStatusRow)[2:]))
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


# --- request_status.csv -------------------------------------------------------------------------------


@dataclass
class RequestStatusRow:
    COLUMNS: ClassVar[Dict[str, str]] = {
        "relative_timestamp": "relative_timestamp(ms)",
        "timestamp": "timestamp(ms)",
    }
    hostuid: str
    pid: int
    start_datetime: str
    relative_timestamp: float
    waiting: Cell
    running: Cell
    swapped: Cell
    timestamp: float


def request_status_rows(recording: Recording) -> List[RequestStatusRow]:
    """Each scheduler mark that reports a queue's size (``scope#QueueName`` WAITING, RUNNING or SWAPPED with
    ``QueueSize=``): that queue's column filled, the others empty; times relative to the process's first
    (exporter_req_status.py, which rounds to 0.01 ms before subtracting)."""
    reported = []
    for m in recording.marks:
        queue = str(m.attrs.get("scope#QueueName", ""))
        size = m.metric("QueueSize")
        if queue in QUEUES and size is not None:
            reported.append((m, queue, size, np_round(ms(m.start_ns), 2)))
    first: Dict[int, float] = {}
    for m, _, _, ms_at in reported:
        first[m.process.pid] = min(first.get(m.process.pid, ms_at), ms_at)
    return [
        RequestStatusRow(
            hostuid=recording.meta.get(m.process, {}).get("hostname", m.process.host),
            pid=m.process.pid,
            start_datetime=when(m.start_ns),
            relative_timestamp=np_round(ms_at - first[m.process.pid], 2),
            waiting=size if queue == "WAITING" else "",
            running=size if queue == "RUNNING" else "",
            swapped=size if queue == "SWAPPED" else "",
            timestamp=ms_at,
        )
        for m, queue, size, ms_at in reported
    ]
