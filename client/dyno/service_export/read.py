"""Reading the databases into one :class:`~.model.Recording`: each table of the schema its columns cast
to the type the rows hold, whatever a writer stored (NULL as '' or 0), in the order written."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

from msmonitor_plugin.service_profiler.schema import (
    OPERATOR_PREFIX,
    OPERATOR_TABLES,
    SERVICE_PREFIX,
    SERVICE_TABLES,
    TABLES,
    Table,
)

from .discover import ExportError, Inputs, process_from_name
from .model import ROW_TYPES, Process, Recording

_READ = {
    "TEXT": "coalesce(CAST({} AS TEXT), '')",
    "INTEGER": "CAST(coalesce({}, 0) AS INTEGER)",
    "REAL": "CAST(coalesce({}, 0) AS REAL)",
}
# A span without an end: a point at its start.
_READ_AS = {("spans", "end_ns"): "CAST(coalesce({}, start_ns, 0) AS INTEGER)"}


def _select(table: Table) -> str:
    forms = (_READ_AS.get((table.name, c.name), _READ[c.type]).format(c.name) for c in table.columns)
    return f"SELECT {', '.join(forms)} FROM {table.name} ORDER BY rowid"


def _rows(db: sqlite3.Connection, table: Table, tables: Sequence[str]) -> List[Tuple[Any, ...]]:
    """The table's rows in the order written; none when the table is missing."""
    return db.execute(_select(table)).fetchall() if table.name in tables else []


@contextlib.contextmanager
def _open(path: Path) -> Iterator[Tuple[sqlite3.Connection, List[str]]]:
    """The database read-only and immutable (it creates no -wal or -shm file), with its table names."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise ExportError(f"{path}: cannot open: {exc}") from None
    try:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        yield db, tables
    except sqlite3.Error as exc:
        raise ExportError(f"{path}: cannot read: {exc}") from None
    finally:
        db.close()


def _identity(meta: Sequence[Tuple[Any, ...]], fallback: Process) -> Process:
    """The process as its meta rows name it (the last 'hostname' and 'pid'), else as its file name does."""
    values = {key: value for key, value, _ in meta}
    host = values.get("hostname") or fallback.host
    pid = values.get("pid", "")
    return Process(host, int(pid)) if pid.strip().isdigit() else Process(host, fallback.pid)


def _fill(
    recording: Recording, wanted: Sequence[Table], process: Process, db: sqlite3.Connection, tables: List[str]
) -> Recording:
    """*recording* with the rows of each *wanted* table, as *process*'s."""
    for table in wanted:
        make = ROW_TYPES[table.name]
        getattr(recording, table.name).extend(make(process, *row) for row in _rows(db, table, tables))
    return recording


def read_service(path: Path) -> Tuple[Process, Recording]:
    """The process that recorded the database, and its rows."""
    with _open(path) as (db, tables):
        process = _identity(_rows(db, TABLES["meta"], tables), process_from_name(path, SERVICE_PREFIX))
        recording = _fill(Recording(), SERVICE_TABLES, process, db, tables)
    return process, recording


def read_operator(path: Path, process: Process) -> Recording:
    with _open(path) as (db, tables):
        return _fill(Recording(has_operators=True), OPERATOR_TABLES, process, db, tables)


def read_all(inputs: Inputs, progress: Callable[[str], None] = lambda line: None) -> Recording:
    """Every input merged, with one *progress* line per database read. An operator database belongs to
    the process whose service database sits beside it under the same ``<host>-<pid>`` name."""
    merged = Recording()
    beside: Dict[Tuple[Path, str], Process] = {}
    for path in inputs.service:
        process, recording = read_service(path)
        beside[path.parent, path.name[len(SERVICE_PREFIX) :]] = process
        progress(
            f"read {len(recording.spans)} spans, {len(recording.events)} events,"
            f" {len(recording.metrics)} metrics from {path}"
        )
        merged.extend(recording)
    for path in inputs.operator:
        key = (path.parent, path.name[len(OPERATOR_PREFIX) :])
        recording = read_operator(path, beside.get(key) or process_from_name(path, OPERATOR_PREFIX))
        progress(f"read {len(recording.api)} api calls, {len(recording.kernel)} kernels from {path}")
        merged.extend(recording)
    return merged
