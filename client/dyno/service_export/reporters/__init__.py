"""The output formats, one module each: ``json`` (:mod:`.chrome_trace`), ``csv`` (:mod:`.csv_tables`) and
``db`` (:mod:`.merged_db`), with the analyser's file names. Each file is written beside its name and
renamed over it when complete; a file the recording has no rows for is skipped with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

from ..model import Recording
from .chrome_trace import write_chrome
from .csv_tables import (
    Skipped,
    write_batch_csv,
    write_forward_csv,
    write_kvcache_csv,
    write_request_csv,
    write_request_status_csv,
)
from .merged_db import write_db

FORMATS = ("json", "csv", "db")
Writer = Callable[[Recording, Path, Sequence[str]], None]  # the formats asked for: some files depend on them
OUTPUTS: Dict[str, Tuple[Tuple[str, Writer], ...]] = {
    "json": (("chrome_tracing.json", write_chrome),),
    "csv": (
        ("request.csv", write_request_csv),
        ("batch.csv", write_batch_csv),
        ("forward.csv", write_forward_csv),
        ("kvcache.csv", write_kvcache_csv),
        ("request_status.csv", write_request_status_csv),
    ),
    "db": (("profiler.db", write_db),),
}


def write(recording: Recording, output: Path, formats: Sequence[str]) -> Tuple[List[Path], Dict[str, str]]:
    """The files of each format (in the order of :data:`FORMATS`) in *output*, made if missing; and
    those skipped, each with why."""
    output.mkdir(parents=True, exist_ok=True)
    written: List[Path] = []
    skipped: Dict[str, str] = {}
    for fmt in (f for f in FORMATS if f in formats):
        for name, writer in OUTPUTS[fmt]:
            try:
                writer(recording, output / name, formats)
            except Skipped as why:
                skipped[name] = str(why)
            else:
                written.append(output / name)
    return written, skipped
