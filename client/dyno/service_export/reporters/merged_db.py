"""``--format db``: ``profiler.db``, the schema's tables with every process's rows in one, each row with
its ``host`` and ``pid``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterator, Tuple

from msmonitor_plugin.service_profiler.schema import OPERATOR_TABLES, SERVICE_TABLES, Table

from ..model import Recording
from .atomic import replacing

INDEXED = ("spans", "events", "metrics")  # by rid


def _values(recording: Recording, table: Table) -> Iterator[Tuple[Any, ...]]:
    columns = table.column_names
    for row in getattr(recording, table.name):
        yield (row.process.host, row.process.pid, *(getattr(row, c) for c in columns))


def _copy(db: sqlite3.Connection, recording: Recording, table: Table) -> None:
    typed = ", ".join(f"{c.name} {c.type}" for c in table.columns)
    db.execute(f"CREATE TABLE {table.name} (host TEXT, pid INTEGER, {typed})")
    marks = ", ".join("?" * (len(table.columns) + 2))
    db.executemany(f"INSERT INTO {table.name} VALUES ({marks})", _values(recording, table))


def write_db(recording: Recording, path: Path) -> None:
    """The input tables (the operators' only when an operator database was read)."""
    tables = SERVICE_TABLES + (OPERATOR_TABLES if recording.has_operators else ())
    with replacing(path) as temp:
        db = sqlite3.connect(temp)
        try:
            db.execute("PRAGMA journal_mode = OFF")  # a new file, renamed into place once complete
            for table in tables:
                _copy(db, recording, table)
            for name in INDEXED:
                db.execute(f"CREATE INDEX {name}_rid ON {name} (rid)")
            db.commit()
        finally:
            db.close()
