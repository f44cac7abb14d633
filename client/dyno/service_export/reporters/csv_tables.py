"""``--format csv``: ``request.csv`` (one row per request id, with its metrics), ``span.csv`` and
``metric.csv``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..model import Recording
from ..per_request import requests
from .atomic import replacing

SPAN_CSV = ("host", "pid", "tid", "domain", "name", "rid", "start_ns", "end_ns", "duration_ms", "attrs")
METRIC_CSV = ("host", "pid", "tid", "domain", "name", "rid", "ts_ns", "value", "kind", "scope")
REQUEST_CSV = ("rid", "first_ns", "last_ns", "duration_ms", "events", "spans", "processes")


def _csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with replacing(path) as temp, temp.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(rows)


def _cell(row: Any, column: str) -> Any:
    """A row's value for a CSV column: its own field, or its process's host or pid."""
    return getattr(row.process, column) if column in ("host", "pid") else getattr(row, column)


def write_span_csv(recording: Recording, path: Path) -> None:
    spans = sorted(recording.spans, key=lambda s: (s.start_ns, s.process, s.tid))
    _csv(path, SPAN_CSV, ([_cell(s, c) for c in SPAN_CSV] for s in spans))


def write_metric_csv(recording: Recording, path: Path) -> None:
    metrics = sorted(recording.metrics, key=lambda m: (m.ts_ns, m.process, m.tid))
    _csv(path, METRIC_CSV, ([_cell(m, c) for c in METRIC_CSV] for m in metrics))


def write_request_csv(recording: Recording, path: Path) -> None:
    """REQUEST_CSV, then a column per metric recorded with a request id (``metric_`` before a name
    that is one of REQUEST_CSV); a request without that metric leaves it empty."""
    rows = requests(recording)
    names = sorted({name for req in rows for name in req.metrics})
    header = [*REQUEST_CSV, *(f"metric_{n}" if n in REQUEST_CSV else n for n in names)]
    _csv(
        path,
        header,
        ([*(getattr(r, c) for c in REQUEST_CSV), *(r.metrics.get(n, "") for n in names)] for r in rows),
    )
