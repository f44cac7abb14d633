"""``request.csv`` and ``request_status.csv`` as the analyser derives them: each request's times and
tokens, and the scheduler's queue sizes over time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .analysis import BATCH_SPAN_NAMES, QUEUES, RESPONSE_NAMES, Cell
from .model import Mark, Recording, single_rid
from .units import ms, np_round, us, when


def _first(values: Iterable[Optional[float]]) -> Cell:
    return next((v for v in values if v is not None), "")


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
