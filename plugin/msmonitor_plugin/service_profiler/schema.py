"""The recording's format, in one place: its files, their tables and columns, and how values are stored.

The plugin writes it (:mod:`.store`, :mod:`.operators`) and ``dyno service export`` reads it, both from
here. Each process of a service writes ``<prof_dir>/<MMDD-HHMM>/Trace_Service/``:

- ``ms_service_<host>-<pid>.db``: :data:`SERVICE_TABLES`, appended across enable cycles (as MindIE's
  ``CREATE TABLE IF NOT EXISTS``);
- ``ascend_service_profiler_<host>-<pid>.db``, with operator timing on: :data:`OPERATOR_TABLES`.

Times are epoch nanoseconds; a request id is stored as given, or as a JSON array for a batch; attributes
as a JSON object. The API appends a row as ``(table, value of each column in order...)``.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

TRACE_DIR = "Trace_Service"
SERVICE_PREFIX = "ms_service_"
OPERATOR_PREFIX = "ascend_service_profiler_"


def db_name(prefix: str) -> str:
    """This process's database: ``<prefix><host>-<pid>.db``."""
    return f"{prefix}{socket.gethostname()}-{os.getpid()}.db"


def text(value: Any) -> str:
    """A value as stored in a TEXT column: strings as they are, anything else (a batch's list of request
    ids, a meta value) as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def attributes(value: Any) -> str:
    """An attribute bag as a JSON object; none as ``{}``."""
    return text(value) if value else "{}"


Encode = Callable[[Any], Any]


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # SQLite's: TEXT, INTEGER or REAL
    not_null: bool = False
    encode: Optional[Encode] = None  # the value as the API gives it -> as stored; None: as it is


@dataclass(frozen=True)
class Table:
    name: str
    columns: Tuple[Column, ...]

    @property
    def column_names(self) -> Tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def create(self) -> str:
        columns = ", ".join(f"{c.name} {c.type}{' NOT NULL' if c.not_null else ''}" for c in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({columns})"

    def insert(self) -> str:
        return f"INSERT INTO {self.name} VALUES ({', '.join('?' * len(self.columns))})"

    def encoder(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """A row's values as the API appends them -> as SQLite takes them."""
        coded = [(i, c.encode) for i, c in enumerate(self.columns) if c.encode is not None]

        def encode(row: Sequence[Any]) -> List[Any]:
            values = list(row)
            for i, code in coded:
                values[i] = code(values[i])
            return values

        return encode


def _c(name: str, sql_type: str, encode: Optional[Encode] = None) -> Column:
    return Column(name, sql_type, encode=encode)


META = Table(
    "meta",
    (
        Column("key", "TEXT", not_null=True),
        Column("value", "TEXT", not_null=True, encode=text),
        Column("ts_ns", "INTEGER", not_null=True),
    ),
)
SPANS = Table(
    "spans",
    (
        _c("name", "TEXT"),
        _c("domain", "TEXT"),
        _c("start_ns", "INTEGER"),
        _c("end_ns", "INTEGER"),
        _c("tid", "INTEGER"),
        _c("rid", "TEXT", text),
        _c("attrs", "TEXT", attributes),
    ),
)
EVENTS = Table(
    "events",
    (
        _c("name", "TEXT"),
        _c("domain", "TEXT"),
        _c("ts_ns", "INTEGER"),
        _c("tid", "INTEGER"),
        _c("rid", "TEXT", text),
        _c("attrs", "TEXT", attributes),
    ),
)
METRICS = Table(
    "metrics",
    (
        _c("name", "TEXT"),
        _c("domain", "TEXT"),
        _c("ts_ns", "INTEGER"),
        _c("tid", "INTEGER"),
        _c("rid", "TEXT", text),
        _c("value", "REAL"),
        _c("kind", "TEXT"),  # set | inc
        _c("scope", "TEXT"),  # as given, 'req' for a request's, or ''
    ),
)
LINKS = Table(
    "links",
    (
        _c("from_rid", "TEXT", text),
        _c("to_rid", "TEXT", text),
        _c("domain", "TEXT"),
        _c("ts_ns", "INTEGER"),
    ),
)
API = Table(
    "api",
    (
        _c("name", "TEXT"),
        _c("start_ns", "INTEGER"),
        _c("end_ns", "INTEGER"),
        _c("tid", "INTEGER"),
        _c("correlation_id", "INTEGER"),
    ),
)
KERNEL = Table(
    "kernel",
    (
        _c("name", "TEXT"),
        _c("type", "TEXT"),
        _c("start_ns", "INTEGER"),
        _c("end_ns", "INTEGER"),
        _c("device", "INTEGER"),
        _c("stream", "INTEGER"),
        _c("correlation_id", "INTEGER"),
    ),
)
SERVICE_TABLES = (META, SPANS, EVENTS, METRICS, LINKS)
OPERATOR_TABLES = (API, KERNEL)
TABLES: Dict[str, Table] = {t.name: t for t in SERVICE_TABLES + OPERATOR_TABLES}
