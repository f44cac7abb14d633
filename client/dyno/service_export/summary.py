"""``--summary``: ``request_summary.csv``, ``batch_summary.csv`` (Metric, Average, Max, Min, P50, P90, P99)
and ``service_summary.csv`` (Metric, Value), as ``msserviceprofiler analyze`` writes them for
``msserviceprofiler compare``: from the same request and batch rows as ``request.csv`` and ``batch.csv``.

A request counts when it has both its ``httpReq`` and a response. Percentiles interpolate linearly between
the two nearest values (numpy's default, which the analyser uses); values are rounded to 4 places.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

from . import analysis
from .model import Recording
from .reporters.csv_tables import Skipped, write_csv

STATS_HEADER = ("Metric", "Average", "Max", "Min", "P50", "P90", "P99")


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def stats(values: Sequence[float]) -> List[float]:
    """Average, Max, Min, P50, P90, P99 (0 for none, as the analyser fills them)."""
    if not values:
        return [0] * 6
    figures = [
        sum(values) / len(values),
        max(values),
        min(values),
        *(percentile(values, p) for p in (50, 90, 99)),
    ]
    return [round(v, 4) for v in figures]


@dataclass
class Served:
    """One request with both ends recorded."""

    first_token_ms: float
    exec_ms: float
    input_tokens: float
    generated_tokens: float
    waiting_ms: float
    start_ms: float

    @property
    def subsequent_token_ms(self) -> float:
        """The time per token after the first."""
        return (self.exec_ms - self.first_token_ms) / max(self.generated_tokens - 1, 1)


def served(recording: Recording) -> List[Served]:
    return [
        Served(
            float(r.first_token_latency),
            float(r.execution_time),
            float(r.recv_token_size or 0),
            float(r.reply_token_size or 0),
            float(r.queue_wait_time),
            float(r.start_time),
        )
        for r in analysis.request_rows(recording)
        if r.execution_time != ""
    ]


def request_summary(requests: Sequence[Served]) -> Dict[str, List[float]]:
    return {
        "first_token_latency (ms)": stats([r.first_token_ms for r in requests]),
        "subsequent_token_latency (ms)": stats([r.subsequent_token_ms for r in requests]),
        "total_time (ms)": stats([r.exec_ms + r.waiting_ms for r in requests]),
        "exec_time (ms)": stats([r.exec_ms for r in requests]),
        "waiting_time (ms)": stats([r.waiting_ms for r in requests]),
        "input_token_num": stats([r.input_tokens for r in requests]),
        "generated_token_num": stats([r.generated_tokens for r in requests]),
    }


def batch_summary(recording: Recording) -> Dict[str, List[float]]:
    """Per executed batch (modelExec and its kin), how many prefill / decode requests it ran and how long
    it took, by the kind it mostly ran."""
    executed = [b for b in analysis.batch_rows(recording) if b.name in analysis.BATCH_EXEC_NAMES]
    prefill = [b for b in executed if b.prefill_batch_size >= max(b.decode_batch_size, 1)]
    decode = [b for b in executed if b not in prefill]
    return {
        "prefill_batch_num": stats([b.prefill_batch_size for b in prefill]),
        "decode_batch_num": stats([b.decode_batch_size for b in decode]),
        "prefill_exec_time (ms)": stats([b.during_time for b in prefill]),
        "decode_exec_time (ms)": stats([b.during_time for b in decode]),
    }


def service_summary(requests: Sequence[Served]) -> Dict[str, float]:
    inputs = sum(r.input_tokens for r in requests)
    generated = sum(r.generated_tokens for r in requests)
    span_s = (max(r.start_ms + r.exec_ms for r in requests) - min(r.start_ms for r in requests)) / 1000
    return {
        "total_input_token_num": inputs,
        "total_generated_token_num": generated,
        "generate_token_speed (token/s)": round(generated / span_s, 4) if span_s > 0 else 0,
        "generate_all_token_speed (token/s)": round((inputs + generated) / span_s, 4) if span_s > 0 else 0,
    }


def write_summaries(recording: Recording, output: Path) -> List[Path]:
    """The three files in *output*; :class:`Skipped` when no request has both ends recorded."""
    requests = served(recording)
    if not requests:
        raise Skipped("no request has both its httpReq and a response (httpRes, DecodeEnd, sendResponse)")
    paths = [output / n for n in ("request_summary.csv", "batch_summary.csv", "service_summary.csv")]
    for path, table in zip(paths[:2], (request_summary(requests), batch_summary(recording))):
        write_csv(path, STATS_HEADER, ([metric, *figures] for metric, figures in table.items()))
    write_csv(paths[2], ("Metric", "Value"), service_summary(requests).items())
    return paths
