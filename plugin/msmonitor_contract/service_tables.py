"""The recording's format, in one place: its files, their tables and columns.

The plugin writes it (:mod:`.store`, :mod:`.operators`) and ``dyno service export`` reads it, both from
here. Each process of a service writes ``<prof_dir>/<MMDD-HHMM>/Trace_Service/``:

- ``ms_service_<host>-<pid>.db``: :data:`SERVICE_TABLES`, MindIE 26.0's tables (``slice``, ``counter``,
  ``flow``, ``process``, ``thread``, ``Meta``) with its column meanings, so that MindIE's own analyser
  (``python -m ms_service_profiler.parse``) and MindStudio Insight read it; appended across enable cycles
  (MindIE's ``CREATE TABLE IF NOT EXISTS``);
- ``ascend_service_profiler_<host>-<pid>.db``, with operator timing on: :data:`OPERATOR_TABLES`.

A ``slice`` row is one event (duration 0) or span; ``cat`` is its domain and ``args`` the message as
MindIE's ``Profiler`` builds it: a JSON object of the attributes (``rid``, metrics as ``"name="``/
``"name+"``, ``"scope#Name"``, ``type`` a :class:`MarkType`). Times are epoch nanoseconds; ``tid`` is the
OS thread id.

Read only, by the exporter: MindIE 8.3's ``Mstx`` (the same message, with ``name`` and ``domain`` in it)
and this project's own earlier tables (:data:`LEGACY_TABLES`).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from enum import IntEnum
from typing import Dict, Tuple

TRACE_DIR = "Trace_Service"
SERVICE_PREFIX = "ms_service_"
OPERATOR_PREFIX = "ascend_service_profiler_"


class MarkType(IntEnum):
    """The message's ``type``, as MindIE's ``ms_service_profiler.profiler.MarkType``."""

    TYPE_EVENT = 0
    TYPE_METRIC = 1
    TYPE_SPAN = 2
    TYPE_LINK = 3


def db_name(prefix: str) -> str:
    """This process's database: ``<prefix><host>-<pid>.db``."""
    return f"{prefix}{socket.gethostname()}-{os.getpid()}.db"


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # SQLite's: TEXT, INTEGER or REAL
    constraint: str = ""  # e.g. PRIMARY KEY AUTOINCREMENT: such a column is not given on insert

    @property
    def given(self) -> bool:
        return "AUTOINCREMENT" not in self.constraint


@dataclass(frozen=True)
class Table:
    name: str
    columns: Tuple[Column, ...]

    @property
    def column_names(self) -> Tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def given_names(self) -> Tuple[str, ...]:
        """The columns an insert gives (all but an autoincrement id)."""
        return tuple(c.name for c in self.columns if c.given)

    def create(self) -> str:
        columns = ", ".join(f"{c.name} {c.type} {c.constraint}".rstrip() for c in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({columns})"

    def insert(self, verb: str = "INSERT") -> str:
        names = self.given_names
        return f"{verb} INTO {self.name} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"


def _table(name: str, *columns: str) -> Table:
    """A table from ``"name TYPE [constraint]"`` strings, as MindIE's DDL reads."""
    parsed = []
    for column in columns:
        col_name, col_type, *rest = column.split()
        parsed.append(Column(col_name, col_type, " ".join(rest)))
    return Table(name, tuple(parsed))


_ID = "id INTEGER PRIMARY KEY AUTOINCREMENT"

# MindIE 26.0 (cpp/include/msServiceProfiler/DBExecutor/DbExecutorSliceData.h, DbExecutorMetaData.h).
SLICE = _table(
    "slice",
    _ID,
    "timestamp INTEGER",
    "duration INTEGER",
    "name TEXT",
    "depth INTEGER",
    "track_id INTEGER",
    "cat TEXT",
    "args TEXT",
    "cname TEXT",
    "end_time INTEGER",
    "flag_id TEXT",
    "pid INTEGER",
    "tid INTEGER",
)
COUNTER = _table("counter", _ID, "name TEXT", "pid TEXT", "timestamp INTEGER", "cat TEXT", "args TEXT")
FLOW = _table(
    "flow", _ID, "flow_id TEXT", "name TEXT", "cat TEXT", "track_id INTEGER", "timestamp INTEGER", "type TEXT"
)
PROCESS = _table(
    "process",
    "pid TEXT PRIMARY KEY",
    "process_name TEXT",
    "label TEXT",
    "process_sort_index INTEGER",
    "parentPid TEXT",
)
THREAD = _table(
    "thread",
    "track_id INTEGER PRIMARY KEY",
    "tid TEXT",
    "pid TEXT",
    "thread_name TEXT",
    "thread_sort_index INTEGER",
)
# name/value pairs; the analyser makes each name a column of every row, so none may be a slice column
# (no "pid"): hostname and ppid, as MindIE writes, and add_meta_info's.
META = _table("Meta", "name TEXT", "value TEXT", "slice TEXT")
# MindIE 8.3 (DbExecutorServiceData.h, DbExecutorMetaData.h): flag 1 a mark, 2 a span; Meta without slice.
SPAN_FLAG = 2
META_83 = _table("Meta", "name TEXT", "value TEXT")
MSTX = _table(
    "Mstx",
    "message TEXT",
    "flag INTEGER",
    "markId INTEGER",
    "timestamp INTEGER",
    "endTimestamp INTEGER",
    "pid INTEGER",
    "tid INTEGER",
)
SERVICE_TABLES = (SLICE, COUNTER, FLOW, PROCESS, THREAD, META)

# This project's recordings before MindIE's layout (meta is lower-case: SQLite names are case-blind, so a
# database holds one or the other, told apart by their columns).
LEGACY_TABLES = (
    _table("meta", "key TEXT", "value TEXT", "ts_ns INTEGER"),
    _table(
        "spans",
        "name TEXT",
        "domain TEXT",
        "start_ns INTEGER",
        "end_ns INTEGER",
        "tid INTEGER",
        "rid TEXT",
        "attrs TEXT",
    ),
    _table("events", "name TEXT", "domain TEXT", "ts_ns INTEGER", "tid INTEGER", "rid TEXT", "attrs TEXT"),
    _table(
        "metrics",
        "name TEXT",
        "domain TEXT",
        "ts_ns INTEGER",
        "tid INTEGER",
        "rid TEXT",
        "value REAL",
        "kind TEXT",
        "scope TEXT",
    ),
    _table("links", "from_rid TEXT", "to_rid TEXT", "domain TEXT", "ts_ns INTEGER"),
)

API = _table(
    "api", "name TEXT", "start_ns INTEGER", "end_ns INTEGER", "tid INTEGER", "correlation_id INTEGER"
)
KERNEL = _table(
    "kernel",
    "name TEXT",
    "type TEXT",
    "start_ns INTEGER",
    "end_ns INTEGER",
    "device INTEGER",
    "stream INTEGER",
    "correlation_id INTEGER",
)
OPERATOR_TABLES = (API, KERNEL)
LEGACY: Dict[str, Table] = {t.name: t for t in LEGACY_TABLES}
