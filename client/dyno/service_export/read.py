"""Reading the databases into one :class:`~.model.Recording`, whichever writer made each:

- ``mindie-26.0``: ``slice`` (with ``counter`` and ``Meta``), as MindIE 26.0 and this plugin write;
- ``mindie-8.3``: ``Mstx`` and ``Meta``, the message holding the name and domain;
- ``msmonitor``: this project's earlier tables (``spans``, ``events``, ``metrics``, ``links``, ``meta``),
  each metric folded into the message of the mark it was recorded with, as MindIE's Profiler puts it.

A database whose ``-wal`` another reader or a dead writer left behind is read with that file's content
(from a copy: the inputs are never changed).
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Sequence, Tuple

from msmonitor_contract import service_tables
from msmonitor_contract.numbers import strict_int
from msmonitor_contract.service_tables import OPERATOR_PREFIX, SERVICE_PREFIX, SPAN_FLAG, MarkType

from .discover import ExportError, Inputs, process_from_name
from .model import (
    EVENT,
    LINK,
    SPAN,
    Api,
    Counter,
    Iterations,
    Kernel,
    Mark,
    Process,
    Recording,
    parse_message,
)
from .rids import link_requests, renamed
from .roles import correct_batch_types

Rows = List[Tuple[Any, ...]]


class _Db:
    """One input database, open read-only, with its tables and their columns."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path
        names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        self.columns = {n.lower(): [r[1] for r in db.execute(f'PRAGMA table_info("{n}")')] for n in names}

    def has(self, table: str, *columns: str) -> bool:
        found = self.columns.get(table.lower())
        return found is not None and all(c in found for c in columns)

    def rows(self, sql: str) -> Rows:
        return self.db.execute(sql).fetchall()


@contextlib.contextmanager
def _open(path: Path) -> Iterator[_Db]:
    """The database read-only; immutable (it creates no -wal or -shm file) unless a left-behind -wal holds
    rows, then a private copy of both, which SQLite recovers."""
    wal = path.with_name(path.name + "-wal")
    with contextlib.ExitStack() as stack:
        source = path
        if wal.exists() and wal.stat().st_size > 0:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dyno-export-")))
            source = folder / path.name
            shutil.copyfile(path, source)
            shutil.copyfile(wal, folder / wal.name)
        uri = f"{source.resolve().as_uri()}?mode=ro" + ("&immutable=1" if source == path else "")
        try:
            db = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise ExportError(f"{path}: cannot open: {exc}") from None
        stack.callback(db.close)
        try:
            yield _Db(db, path)
        except sqlite3.Error as exc:
            raise ExportError(f"{path}: cannot read: {exc}") from None


def _meta(db: _Db) -> Dict[str, str]:
    if db.has("meta", "name", "value"):
        return {str(k): str(v) for k, v in db.rows("SELECT name, value FROM meta ORDER BY rowid")}
    if db.has("meta", "key", "value"):
        return {str(k): str(v) for k, v in db.rows("SELECT key, value FROM meta ORDER BY rowid")}
    return {}


def _process(meta: Dict[str, str], path: Path) -> Process:
    """The process as its file name says (MindIE writes no pid into Meta), on the host Meta names."""
    named = process_from_name(path, SERVICE_PREFIX)
    host = meta.get("hostname") or named.host
    pid = strict_int(meta.get("pid", "").strip())
    return Process(host, named.pid if pid is None else pid)


def _kind(attrs: Dict[str, Any], is_span: bool) -> str:
    kind = attrs.get("type")
    if kind == MarkType.TYPE_LINK:
        return LINK
    return SPAN if is_span or kind == MarkType.TYPE_SPAN else EVENT


class _Row(NamedTuple):
    """A mark as a table holds it, before its batch's members are numbered."""

    name: str
    domain: str
    span: Tuple[int, int]  # start and end, nanoseconds
    tid: int
    kind: str
    attrs: Dict[str, Any]


class _Marks:
    """A database's marks as they are read, each batch's members numbered as the analyser numbers them."""

    def __init__(self, where: Tuple[Process, str]) -> None:
        self.where = where
        self.marks: List[Mark] = []
        self._iterations = Iterations()

    def add(self, row: _Row) -> None:
        start, end = row.span
        attrs = row.attrs
        if "rid" in attrs:
            attrs["rid"] = renamed(attrs["rid"], {})  # numeric ids formatted before members are counted
        members = self._iterations.members(attrs.get("rid"))
        mark = Mark(
            *self.where, row.name, row.domain, start, max(end, start), row.tid, row.kind, attrs, members
        )
        self.marks.append(mark)


def _slices(db: _Db, where: Tuple[Process, str]) -> List[Mark]:
    rows = db.rows(
        "SELECT coalesce(name, ''), coalesce(cat, ''), coalesce(timestamp, 0),"
        " coalesce(end_time, timestamp, 0), coalesce(duration, 0), coalesce(tid, 0), coalesce(args, '')"
        " FROM slice ORDER BY id"
    )
    marks = _Marks(where)
    for name, domain, start, end, duration, tid, args in rows:
        attrs = parse_message(args)
        marks.add(_Row(name, domain, (start, end), tid, _kind(attrs, duration > 0), attrs))
    return marks.marks


def _mstx(db: _Db, where: Tuple[Process, str]) -> List[Mark]:
    rows = db.rows(
        "SELECT coalesce(message, ''), coalesce(flag, 0), coalesce(timestamp, 0),"
        " coalesce(endTimestamp, timestamp, 0), coalesce(tid, 0) FROM mstx ORDER BY markId"
    )
    marks = _Marks(where)
    for message, flag, start, end, tid in rows:
        attrs = parse_message(message)
        name, domain = str(attrs.pop("name", "")), str(attrs.pop("domain", ""))
        marks.add(_Row(name, domain, (start, end), tid, _kind(attrs, flag == SPAN_FLAG), attrs))
    return marks.marks


def _counters(db: _Db, process: Process) -> List[Counter]:
    if not db.has("counter", "name", "timestamp", "cat", "args"):
        return []
    rows = db.rows("SELECT name, coalesce(cat, ''), coalesce(timestamp, 0), args FROM counter ORDER BY id")
    return [Counter(process, str(n), d, ts, parse_message(a)) for n, d, ts, a in rows]


def _legacy(db: _Db, where: Tuple[Process, str]) -> List[Mark]:
    """The older tables as marks, in time order; a metric joins the message of the mark its call recorded
    (same thread and time), or stands as a "Launch" event of its own."""
    rows: List[_Row] = []
    found: Dict[Tuple[int, int], Dict[str, Any]] = {}

    def add(row: _Row, rid: str) -> None:
        """*row*, its message joined by its request id (a column of its own in these tables)."""
        message = {"rid": _legacy_rid(rid), **row.attrs} if rid else row.attrs
        rows.append(row._replace(attrs=message))
        found[row.tid, row.span[1]] = message

    for name, domain, start, end, tid, rid, attrs in _table_rows(db, "spans", _SPANS):
        add(_Row(name, domain, (start, end), tid, SPAN, parse_message(attrs)), rid)
    for name, domain, ts, tid, rid, attrs in _table_rows(db, "events", _EVENTS):
        add(_Row(name, domain, (ts, ts), tid, EVENT, parse_message(attrs)), rid)
    for name, domain, ts, tid, rid, value, kind, scope in _table_rows(db, "metrics", _METRICS):
        if (tid, ts) not in found:
            add(_Row("Launch", domain, (ts, ts), tid, EVENT, parse_message("")), rid)
        message = found[tid, ts]
        message[f"{name}{'+' if kind == 'inc' else '='}"] = value
        if scope:
            message["scope#"] = scope
    for from_rid, to_rid, domain, ts in _table_rows(db, "links", _LINKS):
        link = {"type": int(MarkType.TYPE_LINK), "from": from_rid, "to": to_rid}
        rows.append(_Row("Link", domain, (ts, ts), 0, LINK, link))
    marks = _Marks(where)
    for row in sorted(rows, key=lambda row: row.span[0]):
        marks.add(row)
    return marks.marks


def _legacy_rid(text: str) -> Any:
    """A batch was stored as a JSON array of ids."""
    if text.startswith("["):
        ids = parse_message('{"ids": ' + text + "}").get("ids")
        if isinstance(ids, list):
            return ids
    return text


def _table_rows(db: _Db, table: str, columns: Sequence[str]) -> Rows:
    """The table's rows in the order written, NULL as '' or 0; none when the table is missing."""
    if table not in db.columns:
        return []
    defaults = ["" if c in _TEXT else 0 for c in columns]
    rows = db.rows(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid")
    return [tuple(d if v is None else v for v, d in zip(row, defaults)) for row in rows]


_TEXT = {"name", "type", "domain", "rid", "attrs", "kind", "scope", "from_rid", "to_rid"}
_SPANS, _EVENTS, _METRICS, _LINKS = (
    service_tables.LEGACY[t].column_names for t in ("spans", "events", "metrics", "links")
)
_LAYOUTS: Sequence[Tuple[str, Callable[[_Db], bool], Callable[[_Db, Tuple[Process, str]], List[Mark]]]] = (
    ("mindie-26.0", lambda db: db.has("slice", "args", "cat"), _slices),
    ("mindie-8.3", lambda db: db.has("mstx", "message", "flag"), _mstx),
    ("msmonitor", lambda db: "spans" in db.columns or "events" in db.columns, _legacy),
)


def read_service(path: Path) -> Tuple[Process, Recording]:
    """The process that recorded the database, and its rows; an unknown layout is an error naming it."""
    with _open(path) as db:
        meta = _meta(db)
        process = _process(meta, path)
        for layout, matches, marks in _LAYOUTS:
            if matches(db):
                recording = Recording(
                    marks=marks(db, (process, path.stem)),
                    counters=_counters(db, process),
                    meta={process: meta},
                    layouts={layout: 1},
                )
                return process, recording
    tables = ", ".join(sorted(db.columns)) or "none"
    raise ExportError(
        f"{path}: not a service profiler recording (tables: {tables}; expected slice, Mstx or spans/events)"
    )


def read_operator(path: Path, process: Process) -> Recording:
    with _open(path) as db:
        api = _table_rows(db, "api", service_tables.API.column_names)
        kernel = _table_rows(db, "kernel", service_tables.KERNEL.column_names)
    return Recording(
        api=[Api(process, *row) for row in api], kernel=[Kernel(process, *row) for row in kernel]
    )


def read_all(inputs: Inputs, progress: Callable[[str], None] = lambda line: None) -> Recording:
    """Every input merged, with one *progress* line per database read. An operator database belongs to
    the process whose service database sits beside it under the same ``<host>-<pid>`` name."""
    merged = Recording()
    beside: Dict[Tuple[Path, str], Process] = {}
    for path in inputs.service:
        process, recording = read_service(path)
        beside[path.parent, path.name[len(SERVICE_PREFIX) :]] = process
        (layout,) = recording.layouts
        spans = sum(m.kind == SPAN for m in recording.marks)
        progress(
            f"read {len(recording.marks) - spans} events, {spans} spans, {len(recording.counters)} counters"
            f" ({layout}) from {path}"
        )
        merged.extend(recording)
    for path in inputs.operator:
        key = (path.parent, path.name[len(OPERATOR_PREFIX) :])
        recording = read_operator(path, beside.get(key) or process_from_name(path, OPERATOR_PREFIX))
        progress(f"read {len(recording.api)} api calls, {len(recording.kernel)} kernels from {path}")
        merged.extend(recording)
    # one timeline, as the analyser merges its processes' rows by start time (ties in reading order)
    merged.marks.sort(key=lambda m: m.start_ns)
    return correct_batch_types(link_requests(merged))
