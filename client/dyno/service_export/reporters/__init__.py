"""The output formats, one module each: ``json`` (:mod:`.chrome_trace`), ``csv`` (:mod:`.csv_tables`) and
``db`` (:mod:`.merged_db`). Each file is written beside its name and renamed over it when complete."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

from ..model import Recording
from .chrome_trace import write_chrome
from .csv_tables import write_metric_csv, write_request_csv, write_span_csv
from .merged_db import write_db

FORMATS = ("json", "csv", "db")
Writer = Callable[[Recording, Path], None]
OUTPUTS: Dict[str, Tuple[Tuple[str, Writer], ...]] = {
    "json": (("chrome_tracing.json", write_chrome),),
    "csv": (
        ("request.csv", write_request_csv),
        ("span.csv", write_span_csv),
        ("metric.csv", write_metric_csv),
    ),
    "db": (("profiler.db", write_db),),
}


def write(recording: Recording, output: Path, formats: Sequence[str]) -> List[Path]:
    """The files of each format (in the order of :data:`FORMATS`) in *output*, made if missing."""
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in (f for f in FORMATS if f in formats):
        for name, writer in OUTPUTS[fmt]:
            writer(recording, output / name)
            written.append(output / name)
    return written
