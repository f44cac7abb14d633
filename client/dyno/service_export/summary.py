"""``--summary``: ``request_summary.csv``, ``batch_summary.csv`` (Metric, Average, Max, Min, P50, P90, P99)
and ``service_summary.csv`` (Metric, Value), as ``msserviceprofiler analyze`` writes them for
``msserviceprofiler compare`` (its ``exporters/exporter_summary.py``), by the same rules:

- a request counts when it has its ``httpReq`` and ``httpRes``; its total time is between the two, its
  execution time the sum of the ``modelExec`` spans that ran it, its later tokens' latencies the gaps
  between the ends of its successive iterations; first-token latency and waiting time are
  ``request.csv``'s (where the recording has both, else the sum of its iteration-0 spans and 0);
- a batch counts once per kind (Prefill, Decode) and set of requests, as its size (the analyser's
  execution-time rows never hold a value — it reads them only when the duration's text is all digits —
  and are dropped, as it drops them);
- the service's speeds are tokens over the time from the first ``httpReq`` to the last ``httpRes``.

Percentiles interpolate linearly between the two nearest values (numpy's default); values are rounded to
4 places; a figure with no values is 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from . import request_tables
from .analysis import batch_type
from .model import Mark, Recording, single_rid
from .reporters.csv_tables import Skipped, write_csv
from .units import np_mean, np_round, us

STATS_HEADER = ("Metric", "Average", "Max", "Min", "P50", "P90", "P99")


def percentile(values: Sequence[float], p: float) -> float:
    """numpy's linear percentile, its float steps included (from the upper value when the fraction is
    at least 0.5), so that rounding to 4 places lands where the analyser's does."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * (p / 100)  # numpy scales by the fraction, which rounds differently
    low = int(position)
    a, b = ordered[low], ordered[min(low + 1, len(ordered) - 1)]
    t = position - low
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def stats(values: Sequence[float]) -> List[float]:
    """Average, Max, Min, P50, P90, P99."""
    if not values:
        return [0.0] * 6
    figures = [
        np_mean(values),
        max(values),
        min(values),
        *(percentile(values, p) for p in (50, 90, 99)),
    ]
    return [np_round(float(v), 4) for v in figures]


@dataclass
class Served:
    """What the marks say about one request, in microseconds."""

    arrived: Optional[float] = None  # httpReq's start
    answered: Optional[float] = None  # httpRes's end
    input_tokens: float = 0
    generated_tokens: float = 0
    executing: float = 0.0  # the modelExec spans that ran it
    first_iteration: float = 0.0  # its iteration-0 spans, together
    iteration_ends: Dict[int, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.arrived is not None and self.answered is not None

    @property
    def total_us(self) -> float:
        return (self.answered or 0.0) - (self.arrived or 0.0)

    def later_tokens_ms(self) -> List[float]:
        ends = [end for _, end in sorted(self.iteration_ends.items())]
        # Python's rounding here, not numpy's: the analyser's figures are those (checked against it)
        return [round((b - a) / 1000, 4) for a, b in zip(ends, ends[1:])]


def _note(request: Served, mark: Mark) -> None:
    """A mark of the request alone: its ends, its token counts (the last given)."""
    if mark.name == "httpReq":
        request.arrived = us(mark.start_ns)
    elif mark.name == "httpRes":
        request.answered = us(mark.end_ns)
    received, replied = mark.metric("recvTokenSize"), mark.metric("replyTokenSize")
    request.input_tokens = request.input_tokens if received is None else received
    request.generated_tokens = request.generated_tokens if replied is None else replied


def _ran(request: Served, mark: Mark, iteration: Optional[int]) -> None:
    """A batch span that ran the request (at *iteration*, when given)."""
    duration = us(mark.end_ns) - us(mark.start_ns)
    if mark.name == "modelExec":
        request.executing += duration
    if iteration is not None:
        request.iteration_ends[iteration] = us(mark.end_ns)
        if iteration == 0:
            request.first_iteration += duration


def served(recording: Recording) -> Dict[str, Served]:
    requests: Dict[str, Served] = {}
    for mark in sorted(recording.marks, key=lambda m: m.start_ns):  # the analyser's rows, by start time
        rid = single_rid(mark.rid)
        if rid:
            _note(requests.setdefault(rid, Served()), mark)
        for member, iteration in mark.members:
            if member in requests:
                _ran(requests[member], mark, iteration)
    return {rid: r for rid, r in requests.items() if r.complete}


def request_summary(recording: Recording, requests: Dict[str, Served]) -> Dict[str, List[float]]:
    first_token = request_tables.first_token_ms(recording.marks)
    queue_wait = request_tables.queue_wait_ms(recording.marks)
    both = bool(first_token and queue_wait)  # the analyser takes request.csv's figures only when it has both
    done = list(requests.values())
    return {
        "first_token_latency (ms)": stats(
            list(first_token.values()) if both else [np_round(r.first_iteration / 1000, 4) for r in done]
        ),
        "subsequent_token_latency (ms)": stats([gap for r in done for gap in r.later_tokens_ms()]),
        "total_time (ms)": stats([np_round(r.total_us / 1000, 4) for r in done]),
        "exec_time (ms)": stats([np_round(r.executing / 1000, 4) for r in done]),
        "waiting_time (ms)": stats(list(queue_wait.values()) if both else [0.0 for _ in done]),
        "input_token_num": stats([r.input_tokens for r in done]),
        "generated_token_num": stats([r.generated_tokens for r in done]),
    }


def batch_summary(recording: Recording) -> Dict[str, List[float]]:
    """Per kind, each distinct set of requests batched as that kind, by its size."""
    sizes: Dict[Tuple[str, Tuple[str, ...]], int] = {}
    for mark in recording.marks:
        kind = batch_type(mark)
        if mark.members and kind in ("Prefill", "Decode"):
            sizes[kind, mark.request_ids] = len(mark.members)
    return {
        f"{kind.lower()}_batch_num": stats([n for (k, _), n in sizes.items() if k == kind])
        for kind in ("Prefill", "Decode")
    }


def service_summary(requests: Dict[str, Served]) -> Dict[str, float]:
    done = list(requests.values())
    inputs = sum(r.input_tokens for r in done)
    generated = sum(r.generated_tokens for r in done)
    first = min(r.arrived or 0.0 for r in done)
    span_s = np_round((max(r.answered or 0.0 for r in done) - first) / 1e6, 4)
    return {
        "total_input_token_num": inputs,
        "total_generated_token_num": generated,
        "generate_token_speed (token/s)": np_round(generated / span_s, 4) if span_s > 0 else 0,
        "generate_all_token_speed (token/s)": np_round((inputs + generated) / span_s, 4) if span_s > 0 else 0,
    }


def write_summaries(recording: Recording, output: Path) -> List[Path]:
    """The three files in *output*; :class:`Skipped` when no request has both ends recorded."""
    requests = served(recording)
    if not requests:
        raise Skipped("no request has both its httpReq and its httpRes")
    paths = [output / n for n in ("request_summary.csv", "batch_summary.csv", "service_summary.csv")]
    for path, table in zip(paths[:2], (request_summary(recording, requests), batch_summary(recording))):
        write_csv(path, STATS_HEADER, ([metric, *figures] for metric, figures in table.items()))
    write_csv(paths[2], ("Metric", "Value"), service_summary(requests).items())
    return paths
