"""A service profiler recording (a ``prof_dir``) as files people open: a Chrome/Perfetto trace, CSV
tables and one merged SQLite database — what ``dyno service export`` writes.

The plugin records each process of an inference service into
``<prof_dir>/<MMDD-HHMM>/Trace_Service/ms_service_<host>-<pid>.db`` (spans, events, metrics, links and
meta rows; timestamps in epoch nanoseconds) and, with operator timing on,
``ascend_service_profiler_<host>-<pid>.db`` beside it (``api`` and ``kernel`` rows). Here they are
found (:func:`find_inputs`), checked to be finished (:func:`check_finished`), read into one
:class:`Recording` (:func:`read_all`) and written by format (:func:`write`). Standard library only.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Sequence, Set, Tuple, Union

TRACE_DIR = "Trace_Service"
SERVICE_PREFIX = "ms_service_"
OPERATOR_PREFIX = "ascend_service_profiler_"
FORMATS = ("json", "csv", "db")
# Chrome trace thread ids of the kernel lanes, one per device and stream (above an OS thread's id), and
# of threads whose id is beyond that (see TraceIds).
KERNEL_LANE_BASE = 1_000_000
THREAD_LANE_BASE = 2_000_000
Rid = Union[str, List[str]]


def _ms(ns: int) -> float:
    return ns / 1e6


class ExportError(Exception):
    """An input that cannot be exported (yet); the message names the file and what to do."""


# --- rows: one dataclass per table, each with the process that recorded it ------------------------------


@dataclass(frozen=True, order=True)
class Process:
    host: str
    pid: int

    @property
    def label(self) -> str:
        return f"{self.host}-{self.pid}"


@dataclass(frozen=True, slots=True)
class Meta:
    process: Process
    key: str
    value: str
    ts_ns: int


@dataclass(frozen=True, slots=True)
class Span:
    process: Process
    name: str
    domain: str
    start_ns: int
    end_ns: int
    tid: int
    rid: str  # as stored: an id, a JSON array of ids (a batch), or ''
    attrs: str  # a JSON object

    @property
    def duration_ms(self) -> float:
        return _ms(self.end_ns - self.start_ns)


@dataclass(frozen=True, slots=True)
class Event:
    process: Process
    name: str
    domain: str
    ts_ns: int
    tid: int
    rid: str
    attrs: str


@dataclass(frozen=True, slots=True)
class Metric:
    process: Process
    name: str
    domain: str
    ts_ns: int
    tid: int
    rid: str
    value: float
    kind: str  # set | inc
    scope: str  # as given, 'req' for a request's, or ''


@dataclass(frozen=True, slots=True)
class Link:
    process: Process
    from_rid: str
    to_rid: str
    domain: str
    ts_ns: int


@dataclass(frozen=True, slots=True)
class Api:
    process: Process
    name: str
    start_ns: int
    end_ns: int
    tid: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class Kernel:
    process: Process
    name: str
    type: str
    start_ns: int
    end_ns: int
    device: int
    stream: int
    correlation_id: int


@dataclass
class Recording:
    """Rows read from one database, or from all of them merged."""

    meta: List[Meta] = field(default_factory=list)
    spans: List[Span] = field(default_factory=list)
    events: List[Event] = field(default_factory=list)
    metrics: List[Metric] = field(default_factory=list)
    links: List[Link] = field(default_factory=list)
    api: List[Api] = field(default_factory=list)
    kernel: List[Kernel] = field(default_factory=list)
    has_operators: bool = False  # an operator database was read (profiler.db then has api and kernel)

    def extend(self, other: Recording) -> None:
        self.meta += other.meta
        self.spans += other.spans
        self.events += other.events
        self.metrics += other.metrics
        self.links += other.links
        self.api += other.api
        self.kernel += other.kernel
        self.has_operators = self.has_operators or other.has_operators

    def processes(self) -> List[Process]:
        tables = (self.meta, self.spans, self.events, self.metrics, self.links, self.api, self.kernel)
        return sorted({row.process for rows in tables for row in rows})


@dataclass(frozen=True)
class Inputs:
    service: Tuple[Path, ...]
    operator: Tuple[Path, ...]

    @property
    def all(self) -> Tuple[Path, ...]:
        return self.service + self.operator


# --- finding and checking the inputs ----------------------------------------------------------------


def find_inputs(root: Path) -> Inputs:
    """Every ``Trace_Service/ms_service_*.db`` and ``ascend_service_profiler_*.db`` under *root* (every
    dated folder, every process; *root* may be a ``Trace_Service`` folder itself), sorted."""

    def found(prefix: str) -> Tuple[Path, ...]:
        paths = (p for p in root.rglob(f"{prefix}*.db") if p.parent.name == TRACE_DIR and p.is_file())
        return tuple(sorted(paths))

    return Inputs(found(SERVICE_PREFIX), found(OPERATOR_PREFIX))


def check_finished(paths: Iterable[Path]) -> None:
    """Refuse a database still being written: in WAL mode SQLite keeps ``<file>-wal`` while a connection
    is open and removes it on a clean close."""
    for path in paths:
        wal = path.with_name(path.name + "-wal")
        if wal.exists():
            raise ExportError(
                f'{path}: still being written (its -wal file exists): set "enable": 0 and export once'
                " recording stopped (or, if its process died, open and close it with sqlite3 to recover)"
            )


def process_from_name(path: Path, prefix: str) -> Process:
    """``<prefix><host>-<pid>.db`` as its process (a host may contain dashes; the pid is the last part)."""
    host, _, pid = path.stem[len(prefix) :].rpartition("-")
    return Process(host, int(pid)) if host and pid.isdigit() else Process(path.stem[len(prefix) :], 0)


# --- reading ------------------------------------------------------------------------------------------

# Each column as the type the rows hold, whatever a writer stored: NULL as '' or 0.
_TEXT = "coalesce(CAST({} AS TEXT), '')"
_INT = "CAST(coalesce({}, 0) AS INTEGER)"
_REAL = "CAST(coalesce({}, 0) AS REAL)"
_END = "CAST(coalesce({}, start_ns, 0) AS INTEGER)"  # a span without an end: a point at its start
SQL_TYPES = {_TEXT: "TEXT", _INT: "INTEGER", _REAL: "REAL", _END: "INTEGER"}
COLUMNS: Dict[str, Tuple[Tuple[str, str], ...]] = {
    "meta": (("key", _TEXT), ("value", _TEXT), ("ts_ns", _INT)),
    "spans": (
        ("name", _TEXT),
        ("domain", _TEXT),
        ("start_ns", _INT),
        ("end_ns", _END),
        ("tid", _INT),
        ("rid", _TEXT),
        ("attrs", _TEXT),
    ),
    "events": (
        ("name", _TEXT),
        ("domain", _TEXT),
        ("ts_ns", _INT),
        ("tid", _INT),
        ("rid", _TEXT),
        ("attrs", _TEXT),
    ),
    "metrics": (
        ("name", _TEXT),
        ("domain", _TEXT),
        ("ts_ns", _INT),
        ("tid", _INT),
        ("rid", _TEXT),
        ("value", _REAL),
        ("kind", _TEXT),
        ("scope", _TEXT),
    ),
    "links": (("from_rid", _TEXT), ("to_rid", _TEXT), ("domain", _TEXT), ("ts_ns", _INT)),
    "api": (("name", _TEXT), ("start_ns", _INT), ("end_ns", _INT), ("tid", _INT), ("correlation_id", _INT)),
    "kernel": (
        ("name", _TEXT),
        ("type", _TEXT),
        ("start_ns", _INT),
        ("end_ns", _INT),
        ("device", _INT),
        ("stream", _INT),
        ("correlation_id", _INT),
    ),
}
ROW_TYPES: Dict[str, Callable[..., Any]] = {
    "meta": Meta,
    "spans": Span,
    "events": Event,
    "metrics": Metric,
    "links": Link,
    "api": Api,
    "kernel": Kernel,
}


def _rows(db: sqlite3.Connection, table: str, tables: Sequence[str]) -> List[Tuple[Any, ...]]:
    """The table's rows in the order written; none when the table is missing."""
    if table not in tables:
        return []
    select = ", ".join(form.format(column) for column, form in COLUMNS[table])
    return db.execute(f"SELECT {select} FROM {table} ORDER BY rowid").fetchall()


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


def read_service(path: Path) -> Tuple[Process, Recording]:
    """The process that recorded the database, and its rows."""
    with _open(path) as (db, tables):
        meta = _rows(db, "meta", tables)
        process = _identity(meta, process_from_name(path, SERVICE_PREFIX))
        recording = Recording()
        for table in ("meta", "spans", "events", "metrics", "links"):
            make = ROW_TYPES[table]
            getattr(recording, table).extend(make(process, *row) for row in _rows(db, table, tables))
    return process, recording


def read_operator(path: Path, process: Process) -> Recording:
    with _open(path) as (db, tables):
        recording = Recording(has_operators=True)
        recording.api = [Api(process, *row) for row in _rows(db, "api", tables)]
        recording.kernel = [Kernel(process, *row) for row in _rows(db, "kernel", tables)]
    return recording


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


# --- values -------------------------------------------------------------------------------------------


def parse_rid(text: str) -> Rid:
    """An id, or the list of ids of a batch (stored as a JSON array)."""
    if text.startswith("["):
        with contextlib.suppress(ValueError):
            ids = json.loads(text)
            if isinstance(ids, list):
                return [str(i) for i in ids]
    return text


def parse_attrs(text: str) -> Any:
    """The attributes as an object; text that is not JSON stays text, and NaN or Infinity (which
    Python writes but JSON has not) stays a word."""
    if not text:
        return {}
    try:
        return json.loads(text, parse_constant=str)
    except ValueError:
        return text


def _single(rid: str) -> bool:
    return bool(rid) and isinstance(parse_rid(rid), str)


def _apply(current: float, metric: Metric) -> float:
    """A metric's series after *metric*: ``set`` replaces the value, ``inc`` adds to it."""
    return current + metric.value if metric.kind == "inc" else metric.value


# --- writing: each file to a temporary name beside it, renamed over it when complete --------------------


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path to write *path*'s content to; it becomes *path* (with the umask's permissions)
    only when the block completes, so a reader sees the old file or the whole new one."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        umask = os.umask(0)
        os.umask(umask)
        temp.chmod(0o666 & ~umask)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with replacing(path) as temp, temp.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(rows)


SPAN_CSV = ("host", "pid", "tid", "domain", "name", "rid", "start_ns", "end_ns", "duration_ms", "attrs")
METRIC_CSV = ("host", "pid", "tid", "domain", "name", "rid", "ts_ns", "value", "kind", "scope")
REQUEST_CSV = ("rid", "first_ns", "last_ns", "duration_ms", "events", "spans", "processes")


def _cell(row: Any, column: str) -> Any:
    """A row's value for a CSV column: its own field, or its process's host or pid."""
    return getattr(row.process, column) if column in ("host", "pid") else getattr(row, column)


def write_span_csv(recording: Recording, path: Path) -> None:
    spans = sorted(recording.spans, key=lambda s: (s.start_ns, s.process, s.tid))
    _csv(path, SPAN_CSV, ([_cell(s, c) for c in SPAN_CSV] for s in spans))


def write_metric_csv(recording: Recording, path: Path) -> None:
    metrics = sorted(recording.metrics, key=lambda m: (m.ts_ns, m.process, m.tid))
    _csv(path, METRIC_CSV, ([_cell(m, c) for c in METRIC_CSV] for m in metrics))


@dataclass
class Request:
    """What the rows that carry one request id (not a batch's list) say about that request."""

    rid: str
    first_ns: int
    last_ns: int
    events: int = 0
    spans: int = 0
    seen_in: Set[Process] = field(default_factory=set)
    metrics: Dict[str, float] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return _ms(self.last_ns - self.first_ns)

    @property
    def processes(self) -> int:
        return len(self.seen_in)

    def saw(self, process: Process, start_ns: int, end_ns: int) -> None:
        self.first_ns = min(self.first_ns, start_ns)
        self.last_ns = max(self.last_ns, end_ns)
        self.seen_in.add(process)


def requests(recording: Recording) -> List[Request]:
    """One per request id (spans, events and metrics that carry it alone), the first seen first. A
    metric's value for a request is the end of its series: the last ``set`` plus the ``inc`` after it."""
    found: Dict[str, Request] = {}

    def request(rid: str, process: Process, start_ns: int, end_ns: int) -> Request:
        req = found.setdefault(rid, Request(rid, start_ns, end_ns))
        req.saw(process, start_ns, end_ns)
        return req

    for span in recording.spans:
        if _single(span.rid):
            request(span.rid, span.process, span.start_ns, span.end_ns).spans += 1
    for event in recording.events:
        if _single(event.rid):
            request(event.rid, event.process, event.ts_ns, event.ts_ns).events += 1
    for metric in sorted(recording.metrics, key=lambda m: m.ts_ns):
        if _single(metric.rid):
            values = request(metric.rid, metric.process, metric.ts_ns, metric.ts_ns).metrics
            values[metric.name] = _apply(values.get(metric.name, 0.0), metric)
    return sorted(found.values(), key=lambda r: (r.first_ns, r.rid))


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


def write_db(recording: Recording, path: Path) -> None:
    """The input tables, every process's rows in one, each row with its ``host`` and ``pid``."""
    tables = ["meta", "spans", "events", "metrics", "links"]
    tables += ["api", "kernel"] if recording.has_operators else []
    with replacing(path) as temp:
        db = sqlite3.connect(temp)
        try:
            db.execute("PRAGMA journal_mode = OFF")  # a new file, renamed into place once complete
            for table in tables:
                columns = [name for name, _ in COLUMNS[table]]
                typed = [f"{c} {SQL_TYPES[form]}" for c, form in COLUMNS[table]]
                db.execute(f"CREATE TABLE {table} (host TEXT, pid INTEGER, {', '.join(typed)})")
                marks = ", ".join("?" * (len(columns) + 2))
                db.executemany(
                    f"INSERT INTO {table} VALUES ({marks})",
                    (
                        (row.process.host, row.process.pid, *(getattr(row, c) for c in columns))
                        for row in getattr(recording, table)
                    ),
                )
            for table in ("spans", "events", "metrics"):
                db.execute(f"CREATE INDEX {table}_rid ON {table} (rid)")
            db.commit()
        finally:
            db.close()


# --- the Chrome trace (Perfetto, chrome://tracing) ------------------------------------------------------


def _us(ns: int) -> float:
    return ns / 1000


@dataclass
class TraceIds:
    """The pid and tid each row gets in the trace. Perfetto reads them as 32-bit numbers (a larger one
    becomes 0, the process's own lane): a thread id beyond an OS thread's — Python's thread idents are
    addresses — gets a lane of its own from THREAD_LANE_BASE, named after it."""

    pids: Dict[Process, int]
    lanes: Dict[Tuple[Process, int], int]

    @classmethod
    def of(cls, recording: Recording) -> TraceIds:
        threads = {(row.process, row.tid) for rows in (recording.spans, recording.events) for row in rows}
        threads |= {(a.process, a.tid) for a in recording.api}
        lanes: Dict[Tuple[Process, int], int] = {}
        used: Dict[Process, int] = {}  # lanes given in each process
        for process, tid in sorted(threads):
            if not 0 <= tid < KERNEL_LANE_BASE:
                used[process] = used.get(process, 0) + 1
                lanes[process, tid] = THREAD_LANE_BASE + used[process] - 1
        return cls(trace_pids(recording.processes()), lanes)

    def pid(self, process: Process) -> int:
        return self.pids[process]

    def tid(self, process: Process, tid: int) -> int:
        return self.lanes.get((process, tid), tid)


def trace_pids(processes: Iterable[Process]) -> Dict[Process, int]:
    """Each process's pid in the trace: its own, unless a process of another host already has it."""
    pids: Dict[Process, int] = {}
    taken: Set[int] = set()
    for process in sorted(processes):
        pid = process.pid
        while pid in taken:
            pid = max(taken) + 1
        taken.add(pid)
        pids[process] = pid
    return pids


def _args(domain: str, rid: str, attrs: str) -> Dict[str, Any]:
    return {"domain": domain, "rid": parse_rid(rid), "attrs": parse_attrs(attrs)}


def _category(domain: str) -> Dict[str, str]:
    return {"cat": domain} if domain else {}


def _kernel_lane(kernel: Kernel) -> int:
    return KERNEL_LANE_BASE + kernel.device * 1000 + kernel.stream


def _thread_name(pid: int, tid: int, name: str) -> Dict[str, Any]:
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def _metadata(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    for process, pid in ids.pids.items():
        yield {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process.label}}
    for (process, tid), lane in ids.lanes.items():
        yield _thread_name(ids.pid(process), lane, f"thread {tid}")
    for process, device, stream in sorted({(k.process, k.device, k.stream) for k in recording.kernel}):
        lane = KERNEL_LANE_BASE + device * 1000 + stream
        yield _thread_name(ids.pid(process), lane, f"device {device} stream {stream}")


def _slices(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    for s in recording.spans:
        yield {
            "ph": "X",
            "name": s.name,
            **_category(s.domain),
            "ts": _us(s.start_ns),
            "dur": _us(max(s.end_ns - s.start_ns, 0)),
            "pid": ids.pid(s.process),
            "tid": ids.tid(s.process, s.tid),
            "args": _args(s.domain, s.rid, s.attrs),
        }
    for e in recording.events:
        yield {
            "ph": "i",
            "s": "t",
            "name": e.name,
            **_category(e.domain),
            "ts": _us(e.ts_ns),
            "pid": ids.pid(e.process),
            "tid": ids.tid(e.process, e.tid),
            "args": _args(e.domain, e.rid, e.attrs),
        }


def _counters(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    """One counter track per process and metric (and scope, other than a request's): ``inc`` rows add."""
    series: Dict[Tuple[Process, str, str], float] = {}
    for m in sorted(recording.metrics, key=lambda m: m.ts_ns):
        scope = "" if m.scope in ("", "req") else m.scope
        key = (m.process, m.name, scope)
        series[key] = value = _apply(series.get(key, 0.0), m)
        if not math.isfinite(value):
            continue  # NaN and Infinity are not JSON: metric.csv has them
        yield {
            "ph": "C",
            "name": m.name,
            **_category(m.domain),
            "ts": _us(m.ts_ns),
            "pid": ids.pid(m.process),
            "args": {f"{m.name} ({scope})" if scope else m.name: value},
        }


def _operators(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    for a in recording.api:
        yield {
            "ph": "X",
            "name": a.name,
            "cat": "api",
            "ts": _us(a.start_ns),
            "dur": _us(max(a.end_ns - a.start_ns, 0)),
            "pid": ids.pid(a.process),
            "tid": ids.tid(a.process, a.tid),
            "args": {"correlation_id": a.correlation_id},
        }
    for k in recording.kernel:
        yield {
            "ph": "X",
            "name": k.name,
            "cat": "kernel",
            "ts": _us(k.start_ns),
            "dur": _us(max(k.end_ns - k.start_ns, 0)),
            "pid": ids.pid(k.process),
            "tid": _kernel_lane(k),
            "args": {
                "type": k.type,
                "device": k.device,
                "stream": k.stream,
                "correlation_id": k.correlation_id,
            },
        }


def _flows(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    """Each request id's spans and events in time order, across processes, joined by one flow: it starts
    at the first (``s``), steps through the others (``t``) and ends at the last (``f``), each bound to the
    slice or instant that begins there (written after them: Perfetto binds a flow event to the slice
    on top of its thread's stack, and keeps the file's order among equal timestamps)."""
    stops: Dict[str, List[Tuple[int, int, int]]] = {}

    def stop(rid: str, ts_ns: int, process: Process, tid: int) -> None:
        if _single(rid):
            stops.setdefault(rid, []).append((ts_ns, ids.pid(process), ids.tid(process, tid)))

    for span in recording.spans:
        stop(span.rid, span.start_ns, span.process, span.tid)
    for event in recording.events:
        stop(event.rid, event.ts_ns, event.process, event.tid)
    flow_id = 0
    for rid, points in stops.items():
        if len(points) < 2:
            continue
        flow_id += 1
        points.sort()
        for i, (ts_ns, pid, tid) in enumerate(points):
            phase = "s" if i == 0 else "f" if i == len(points) - 1 else "t"
            flow = {"ph": phase, "id": flow_id, "name": rid, "cat": "request", "ts": _us(ts_ns)}
            yield {**flow, "pid": pid, "tid": tid, **({} if phase == "s" else {"bp": "e"})}


def trace_events(recording: Recording) -> Iterator[Dict[str, Any]]:
    ids = TraceIds.of(recording)
    for part in (_metadata, _slices, _counters, _operators, _flows):
        yield from part(recording, ids)


def write_chrome(recording: Recording, path: Path) -> None:
    """``{"traceEvents": [...], "displayTimeUnit": "ms"}``, one event a line, written as generated."""
    encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode  # one for every event
    with replacing(path) as temp, temp.open("w", encoding="utf-8") as out:
        out.write('{"traceEvents": [\n')
        for i, event in enumerate(trace_events(recording)):
            out.write(",\n" if i else "")
            out.write(encode(event))
        out.write('\n], "displayTimeUnit": "ms"}\n')


# --- all of it ---------------------------------------------------------------------------------------

OUTPUTS: Dict[str, Tuple[Tuple[str, Callable[[Recording, Path], None]], ...]] = {
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
