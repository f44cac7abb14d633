"""``--format csv``: the analyser's CSV files, each with its columns (:func:`..analysis.columns`). A file
the recording has no rows for is not written (as the analyser does), and the reason is said."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Iterable, List, Sequence

from msmonitor_contract.files import replacing

from .. import analysis, engine_tables, request_tables
from ..model import Recording


class Skipped(Exception):
    """An output the recording has nothing for; the message says what it needed."""


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with replacing(path) as temp, temp.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")  # as pandas writes
        writer.writerow(header)
        writer.writerows(rows)


def _table(rows: List[Any], needs: str, path: Path) -> None:
    """*rows* (dataclasses of :mod:`..request_tables` or :mod:`..engine_tables`) under their columns, or
    :class:`Skipped` naming *needs*."""
    if not rows:
        raise Skipped(f"no rows: it needs {needs}")
    write_csv(path, analysis.columns(type(rows[0])), map(analysis.cells, rows))


def write_request_csv(recording: Recording, path: Path, formats: Sequence[str]) -> None:
    rows = request_tables.request_rows(recording)
    if rows and all(r.recv_token_size == r.reply_token_size == r.execution_time == "" for r in rows):
        rows = []  # the analyser's rule: nothing but ids is not a request table
    _table(rows, "marks of one request id (httpReq, httpRes, recvTokenSize=, replyTokenSize=)", path)


def write_batch_csv(recording: Recording, path: Path, formats: Sequence[str]) -> None:
    rows = engine_tables.batch_rows(recording)
    if not rows:
        raise Skipped("no rows: it needs batch spans (BatchSchedule or batchFrameworkProcessing, modelExec)")
    write_csv(path, engine_tables.batch_columns(rows), map(engine_tables.batch_cells, rows))


def write_forward_csv(recording: Recording, path: Path, formats: Sequence[str]) -> None:
    needs = "forward spans and a BatchSchedule or batchFrameworkProcessing span"
    _table(engine_tables.forward_rows(recording), needs, path)


def write_kvcache_csv(recording: Recording, path: Path, formats: Sequence[str]) -> None:
    needs = "marks of domain KVCache or Schedule.KVCache (Allocate/Free with deviceBlock=, or KVCacheStatus)"
    _table(engine_tables.kvcache_rows(recording, whole_seconds="db" in formats), needs, path)


def write_request_status_csv(recording: Recording, path: Path, formats: Sequence[str]) -> None:
    needs = "scheduler marks with scope#QueueName (WAITING, RUNNING, SWAPPED) and QueueSize="
    _table(request_tables.request_status_rows(recording), needs, path)
