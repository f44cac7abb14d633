"""``--format db``: ``profiler.db`` as the analyser writes it for MindStudio Insight: every process's marks
in MindIE 26.0's tables (``process``, ``thread``, ``slice``, ``counter``, ``flow``), the analyser's tables
(``request``, ``batch``, ``batch_req``, ``batch_exec``, ``forward``, ``kvcache``, ``request_status``,
with the CSV files' columns), ``data_table`` listing them with their views (``request_data``,
``batch_info``, ``forward_info``, ``kvcache_usage``), and the operators' ``api`` and ``kernel``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Dict, Iterable, List, Sequence, Tuple

from msmonitor_plugin.service_profiler import schema

from .. import analysis
from ..analysis import flow_phase
from ..model import Process, Recording
from .atomic import replacing
from .chrome_trace import trace_pids, track

Rows = List[Tuple[Any, ...]]
# Analyser table -> (its view for Insight, or ''), in data_table's order.
VIEWS = (
    ("request", "request_data"),
    ("batch", "batch_info"),
    ("batch_req", ""),
    ("batch_exec", ""),
    ("forward", "forward_info"),
    ("kvcache", "kvcache_usage"),
    ("request_status", ""),
)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _create(db: sqlite3.Connection, table: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    db.execute(f"CREATE TABLE {table} ({', '.join(map(_quoted, header))})")
    db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(header))})", rows)


def _copy(db: sqlite3.Connection, table: schema.Table, rows: Iterable[Sequence[Any]]) -> None:
    db.execute(table.create())
    db.executemany(table.insert(), rows)


def _trace_tables(db: sqlite3.Connection, recording: Recording) -> None:
    pids = trace_pids(recording.processes())
    _copy(db, schema.PROCESS, ((str(pid), p.label, p.host, i, "") for i, (p, pid) in enumerate(pids.items())))
    tracks = sorted({(pids[m.process], m.tid, track(m)) for m in recording.marks})
    track_ids = {(pid, name): i for i, (pid, _, name) in enumerate(tracks)}
    _copy(db, schema.THREAD, ((i, str(tid), str(pid), name, i) for i, (pid, tid, name) in enumerate(tracks)))
    _copy(
        db,
        schema.SLICE,
        (
            (m.start_ns, m.end_ns - m.start_ns, m.name, 0, track_ids[pids[m.process], track(m)], m.domain,
             json.dumps(m.attrs, default=str), "", m.end_ns, "", pids[m.process], m.tid)
            for m in recording.marks
        ),
    )  # fmt: skip
    _copy(
        db,
        schema.COUNTER,
        ((c.name, str(pids[c.process]), c.ts_ns, c.domain, json.dumps(c.values)) for c in recording.counters),
    )
    _copy(db, schema.FLOW, _flows(recording, pids, track_ids))


def _flows(recording: Recording, pids: Dict[Process, int], track_ids: Dict[Tuple[int, str], int]) -> Rows:
    return [
        (rid, f"flow_{rid}", rid, track_ids[pids[m.process], track(m)], m.start_ns, flow_phase(i, len(path)))
        for rid, path in analysis.request_paths(recording.marks).items()
        for i, m in enumerate(path)
    ]


def _analysis_tables(db: sqlite3.Connection, recording: Recording) -> None:
    requests = analysis.request_rows(recording)
    _create(db, "request", analysis.columns(analysis.RequestRow), map(analysis.cells, requests))
    batches = analysis.batch_rows(recording)
    _create(db, "batch", analysis.batch_columns(batches), map(analysis.batch_cells, batches))
    _create(
        db,
        "batch_req",
        ("batch_id", "name", "rid", "iter"),
        ((i, b.name, rid, it) for i, b, m in _batch_marks(recording, batches) for rid, it in m.members),
    )
    _create(
        db,
        "batch_exec",
        ("batch_id", "name", "start_time(ms)", "end_time(ms)", "during_time(ms)"),
        (
            (i, b.name, b.start_time, b.end_time, b.during_time)
            for i, b, _ in _batch_marks(recording, batches)
        ),
    )
    forwards = analysis.forward_rows(recording)
    _create(db, "forward", analysis.columns(analysis.ForwardRow), map(analysis.cells, forwards))
    kvcache = analysis.kvcache_rows(recording)
    header = analysis.columns(type(kvcache[0]) if kvcache else analysis.KvStatusRow)
    _create(db, "kvcache", header, map(analysis.cells, kvcache))
    status = analysis.request_status_rows(recording)
    _create(db, "request_status", analysis.columns(analysis.RequestStatusRow), map(analysis.cells, status))


def _batch_marks(recording: Recording, batches: List[analysis.BatchRow]) -> Iterable[Tuple[int, Any, Any]]:
    """Each batch row with its index and the mark it came from (batch_rows keeps the marks' order)."""
    names = {b.name for b in batches}
    marks = [m for m in recording.marks if m.name in names]
    return ((i, b, m) for i, (b, m) in enumerate(zip(batches, marks)))


def _catalogue(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE data_table (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, view_name TEXT)")
    for table, view in VIEWS:
        if view:
            db.execute(f"CREATE VIEW {view} AS SELECT * FROM {table}")
        db.execute("INSERT INTO data_table (name, view_name) VALUES (?, ?)", (table, view or table))


def write_db(recording: Recording, path: Path) -> None:
    with replacing(path) as temp:
        db = sqlite3.connect(temp)
        try:
            db.execute("PRAGMA journal_mode = OFF")  # a new file, renamed into place once complete
            _trace_tables(db, recording)
            _analysis_tables(db, recording)
            _catalogue(db)
            if recording.api or recording.kernel:
                _copy(
                    db,
                    schema.API,
                    ((a.name, a.start_ns, a.end_ns, a.tid, a.correlation_id) for a in recording.api),
                )
                _copy(db, schema.KERNEL, (
                    (k.name, k.type, k.start_ns, k.end_ns, k.device, k.stream, k.correlation_id)
                    for k in recording.kernel
                ))  # fmt: skip
            db.commit()
        finally:
            db.close()
