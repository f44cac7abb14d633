"""The curves MindIE's analyser writes into profiler.db for MindStudio Insight's line charts
(exporter_latency.py, exporter_req_status.py, 26.0): ``req_latency`` (percentiles of the requests
finished so far, at each finishing time), ``first_token_latency``, ``prefill_gen_speed`` and
``decode_gen_speed`` (statistics per 100 ms window), and the ``request_status`` table (queue sizes by
time), one typed row each. Latencies are microseconds, the first token's milliseconds (request.csv's
figure), speeds tokens per second, as its tables hold them; the curve tables' timestamps are the local
time of the machine exporting (it formats them with ``datetime.fromtimestamp``), unlike the Shanghai
time of its other tables."""

from __future__ import annotations

import bisect
import datetime
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

from .analysis import BATCH_EXEC_NAMES, SCHEDULE_NAMES, Cell
from .model import Mark, Recording
from .request_tables import first_token_spans
from .summary import percentile
from .units import np_mean, np_round, us, when

WINDOW_US = 100_000  # the analyser's fixed window for the time-grouped curves
MAX_POINTS = 100  # req_latency: at most about this many cumulative points
FINISHING = ("httpReq", "httpRes", "DecodeEnd", "FINISHED")  # the marks a request's latency spans


def local_time(at_us: float) -> str:
    return datetime.datetime.fromtimestamp(at_us / 1_000_000).strftime("%Y-%m-%d %H:%M:%S:%f")


# --- req_latency ---------------------------------------------------------------------------------------


@dataclass
class LatencyRow:
    """The requests finished by ``timestamp``: their latencies' average and percentiles (rounded to 0.01),
    and the median of every request's (not rounded)."""

    timestamp: str
    avg: float
    p99: float
    p90: float
    p50: float
    p50_alltime: float


def request_latencies(recording: Recording) -> Dict[str, Tuple[float, float]]:
    """Per request whose first finishing mark is its ``httpReq`` and that has another: (the end of its
    last, the span from its first start to that end), microseconds."""
    found: Dict[str, List[Tuple[int, int, str]]] = {}
    for m in recording.marks:
        if m.name in FINISHING:
            for rid in m.request_ids:
                found.setdefault(rid, []).append((m.start_ns, m.end_ns, m.name))
    latencies = {}
    for rid, marks in found.items():
        marks.sort()
        if len(marks) > 1 and marks[0][2] == "httpReq":
            end = us(max(e for _, e, _ in marks))
            latencies[rid] = (end, end - us(marks[0][0]))
    return latencies


def req_latency_rows(recording: Recording) -> List[LatencyRow]:
    by_end: Dict[float, List[float]] = {}
    for _, (end, latency) in sorted(request_latencies(recording).items()):  # by request id, as grouped
        by_end.setdefault(end, []).append(latency)
    ends = sorted(by_end)
    every = [v for end in ends for v in by_end[end]]
    step = max(len(ends) // MAX_POINTS, 1)
    rows, count = [], 0
    for i, end in enumerate(ends):
        count += len(by_end[end])
        if (i + 1) % step == 0 or i == len(ends) - 1:
            so_far = every[:count]
            p50, p90, p99 = (np_round(percentile(so_far, p), 2) for p in (50, 90, 99))
            rows.append(LatencyRow(local_time(end), np_round(np_mean(so_far), 2), p99, p90, p50,
                                   percentile(every, 50)))  # fmt: skip
    return rows


# --- statistics per window -------------------------------------------------------------------------------


@dataclass
class FirstTokenRow:
    """The first-token latencies of the requests that arrived in a window (milliseconds)."""

    timestamp: str
    p50: float
    p90: float
    p99: float
    min_value: float
    p50_alltime: float


@dataclass
class SpeedRow:
    """Tokens per second of the batches that started in a window."""

    timestamp: str
    p50: float
    p90: float
    p99: float
    avg: float
    p50_alltime: float


Sample = Tuple[float, float]  # (microseconds, value)


def windows(samples: Sequence[Sample]) -> Iterator[Tuple[str, List[float]]]:
    """The values by 100 ms window from the first sample's time (closed on the left), each window's
    start as local time; empty windows left out."""
    base = min(t for t, _ in samples)
    last = max(t for t, _ in samples)
    edges = [base + i * WINDOW_US for i in range(int((last - base) // WINDOW_US) + 2)]
    grouped: Dict[int, List[float]] = {}
    for t, value in samples:
        grouped.setdefault(bisect.bisect_right(edges, t) - 1, []).append(value)
    for i in sorted(grouped):
        yield local_time(edges[i]), grouped[i]


Row = TypeVar("Row")


def _by_window(samples: Sequence[Sample], row: Callable[[str, List[float], float], Row]) -> List[Row]:
    """One row per window, made from its start, its values and the median of every sample."""
    if not samples:
        return []
    overall = percentile([v for _, v in samples], 50)
    return [row(at, values, overall) for at, values in windows(samples)]


def _quantiles(values: Sequence[float]) -> Tuple[float, float, float]:
    return percentile(values, 50), percentile(values, 90), percentile(values, 99)


def first_token_rows(recording: Recording) -> List[FirstTokenRow]:
    samples = [(start, (end - start) / 1000) for start, end in first_token_spans(recording.marks).values()]
    return _by_window(samples, lambda at, v, all50: FirstTokenRow(at, *_quantiles(v), min(v), all50))


def _speed_rows(samples: Sequence[Sample]) -> List[SpeedRow]:
    return _by_window(samples, lambda at, v, all50: SpeedRow(at, *_quantiles(v), np_mean(v), all50))


@dataclass(frozen=True)
class Step:
    """One request's part in a batch span: the analyser's req_event rows of batches."""

    event: str
    iteration: Optional[int]
    start_us: float
    end_us: float
    batch_size: int


def request_steps(recording: Recording) -> Dict[str, List[Step]]:
    """Per request, the executions of each batch it was scheduled in, at its iteration there, and the
    schedule span of its first (iteration 0), in time order (processor_req.py). A schedule span and an
    execution are of one batch when their ``res`` lists read the same (the analyser's batch id), in
    whichever processes they were recorded."""
    runs: Dict[str, List[Mark]] = {}
    for m in recording.marks:
        if m.name in BATCH_EXEC_NAMES and m.members:
            runs.setdefault(str(m.rid), []).append(m)
    steps: Dict[str, List[Step]] = {}
    for s in (m for m in recording.marks if m.name in SCHEDULE_NAMES and m.members):
        size = len(s.members)
        for rid, iteration in s.members:
            mine = steps.setdefault(rid, [])
            mine += [
                Step(m.name, iteration, us(m.start_ns), us(m.end_ns), size) for m in runs.get(str(s.rid), [])
            ]
            if iteration == 0:
                mine.append(Step(s.name, 0, us(s.start_ns), us(s.end_ns), size))
    for mine in steps.values():
        mine.sort(key=lambda step: step.start_us)
    return steps


def per_second(tokens: int, took_us: float) -> float:
    return tokens / (took_us / 1_000_000)


def prefill_speed_rows(recording: Recording) -> List[SpeedRow]:
    """Per request, its first batch's size over the time from that batch's schedule start to its first
    execution's end."""
    samples = []
    for mine in request_steps(recording).values():
        first = [s for s in mine if s.iteration == 0]
        sched = next((s for s in first if s.event in SCHEDULE_NAMES), None)
        ran = next((s for s in first if s.event in BATCH_EXEC_NAMES), None)
        if sched and ran and sched.batch_size > 0 and ran.end_us > sched.start_us:
            samples.append((sched.start_us, per_second(sched.batch_size, ran.end_us - sched.start_us)))
    return _speed_rows(samples)


def decode_speed_rows(recording: Recording) -> List[SpeedRow]:
    """Per request, each execution of the iteration after the previous one's: its batch's size over the
    time between their ends (vLLM's schedule span counts as an execution, as the analyser counts it)."""
    counted = (*BATCH_EXEC_NAMES, "batchFrameworkProcessing")
    samples = []
    for mine in request_steps(recording).values():
        runs = [s for s in mine if s.event in counted]
        for before, step in zip(runs, runs[1:]):
            following = before.iteration is not None and step.iteration == before.iteration + 1
            if following and step.batch_size > 0 and step.end_us > before.end_us:
                samples.append((step.start_us, per_second(step.batch_size, step.end_us - before.end_us)))
    return _speed_rows(samples)


# --- request_status (the table; request_status.csv is request_tables.request_status_rows) ----------------


@dataclass
class QueueRow:
    """The queue sizes reported at one moment (Shanghai time, to the microsecond): the first of each queue
    at that moment, empty if that queue was not reported then, 0 if never (the analyser's pivot)."""

    timestamp: str
    WAITING: Cell
    RUNNING: Cell
    PENDING: Cell


QUEUE_NAMES = ("WAITING", "RUNNING", "SWAPPED", "PENDING")  # SWAPPED makes a row, not a column


def queue_rows(recording: Recording) -> List[QueueRow]:
    at: Dict[str, Dict[str, float]] = {}
    for m in recording.marks:
        queue, size = str(m.attrs.get("scope#QueueName", "")), m.metric("QueueSize")
        if m.domain == "Schedule" and queue in QUEUE_NAMES and size is not None:
            at.setdefault(when(m.start_ns), {}).setdefault(queue, size)
    reported = {queue for sizes in at.values() for queue in sizes}
    return [
        QueueRow(moment, *(sizes.get(q) if q in reported else 0 for q in ("WAITING", "RUNNING", "PENDING")))
        for moment, sizes in sorted(at.items())
    ]
