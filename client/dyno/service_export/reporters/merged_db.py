"""``--format db``: ``profiler.db`` as the analyser writes it for MindStudio Insight: every process's marks
in MindIE 26.0's tables (``process``, ``thread``, ``slice``, ``counter``, ``flow``), the analyser's tables
(``request``, ``batch``, ``batch_req``, ``batch_exec``, ``forward``, ``kvcache``, ``request_status``)
under its table columns, the views Insight reads them by (``request_data``, ``batch_info``,
``forward_info``, ``kvcache_usage``: the CSV files' columns) listed in ``data_table``, ``data_link``, the
line charts (:mod:`.insight_curves`) with ``translate``, and the operators' ``api`` and ``kernel``."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Sequence, Tuple

from msmonitor_contract import service_tables
from msmonitor_contract.files import replacing

from .. import curves, engine_tables, request_tables
from ..analysis import cells, columns, flow_phase, request_paths
from ..engine_tables import ForwardRow, KvStatusRow
from ..model import Process, Recording
from ..request_tables import RequestRow
from ..units import us
from . import insight_curves
from .chrome_trace import trace_pids, trace_processes, track

Rows = List[Tuple[Any, ...]]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _create(db: sqlite3.Connection, table: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    db.execute(f"CREATE TABLE {table} ({', '.join(map(_quoted, header))})")
    db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(header))})", rows)


def _copy(db: sqlite3.Connection, table: service_tables.Table, rows: Iterable[Sequence[Any]]) -> None:
    db.execute(table.create())
    db.executemany(table.insert(), rows)


def _trace_tables(db: sqlite3.Connection, recording: Recording) -> None:
    pids = trace_pids(recording.processes())
    shown = trace_processes(recording).values()
    _copy(db, service_tables.PROCESS, ((str(p.pid), p.name, p.labels, p.sort_index, "") for p in shown))
    tracks = sorted({(pids[m.process], track(m)) for m in recording.marks})
    track_ids = {key: i for i, key in enumerate(tracks)}
    # a track's tid is its name, as in the trace (one track may hold several threads' marks)
    _copy(db, service_tables.THREAD, ((i, name, str(pid), name, i) for i, (pid, name) in enumerate(tracks)))
    _copy(
        db,
        service_tables.SLICE,
        (
            (m.start_ns, m.end_ns - m.start_ns, m.name, 0, track_ids[pids[m.process], track(m)], m.domain,
             json.dumps(m.attrs, default=str), "", m.end_ns, "", pids[m.process], m.tid)
            for m in recording.marks
        ),
    )  # fmt: skip
    _copy(
        db,
        service_tables.COUNTER,
        ((c.name, str(pids[c.process]), c.ts_ns, c.domain, json.dumps(c.values)) for c in recording.counters),
    )
    _copy(db, service_tables.FLOW, _flows(recording, pids, track_ids))


def _flows(recording: Recording, pids: Dict[Process, int], track_ids: Dict[Tuple[int, str], int]) -> Rows:
    return [
        (rid, f"flow_{rid}", rid, track_ids[pids[m.process], track(m)], m.start_ns, flow_phase(i, len(path)))
        for rid, path in request_paths(recording.marks).items()
        for i, m in enumerate(path)
    ]


@dataclass(frozen=True)
class Output:
    """One of the analyser's tables, and the view MindStudio Insight reads it by ('' for none)."""

    table: str
    view: str
    table_header: Sequence[str]
    view_header: Sequence[str]
    rows: Iterable[Sequence[Any]]


def _outputs(recording: Recording) -> Iterator[Output]:
    requests = request_tables.request_rows(recording)
    yield Output("request", "request_data", columns(RequestRow, "TABLE_COLUMNS"), columns(RequestRow),
                 map(cells, requests))  # fmt: skip
    batches = engine_tables.batch_rows(recording)
    yield Output("batch", "batch_info", engine_tables.batch_columns(batches, "TABLE_COLUMNS"),
                 engine_tables.batch_columns(batches), map(engine_tables.batch_cells, batches))  # fmt: skip
    kvcache = engine_tables.kvcache_rows(recording, whole_seconds=True)
    kv_type = type(kvcache[0]) if kvcache else KvStatusRow
    yield Output("kvcache", "kvcache_usage", columns(kv_type, "TABLE_COLUMNS"), columns(kv_type),
                 map(cells, kvcache))  # fmt: skip
    forwards = engine_tables.forward_rows(recording)
    yield Output("forward", "forward_info", columns(ForwardRow, "TABLE_COLUMNS"), columns(ForwardRow),
                 map(cells, forwards))  # fmt: skip
    status = columns(curves.QueueRow)
    yield Output("request_status", "", status, status, map(cells, curves.queue_rows(recording)))
    requests_in, spans = _batches(recording)
    yield Output("batch_req", "", BATCH_REQ, BATCH_REQ, requests_in)
    yield Output("batch_exec", "", BATCH_EXEC, BATCH_EXEC, spans)


BATCH_REQ = ("batch_id", "req_id", "rid", "iter", "block")
BATCH_EXEC = ("batch_id", "event", "pid", "start", "end")


def _batches(recording: Recording) -> Tuple[Rows, Rows]:
    """Each batch's requests with their iteration, and its spans in microseconds."""
    requests_in: Rows = []
    spans: Rows = []
    for batch in engine_tables.batches(recording):
        requests_in += [(batch.number, rid, rid, it, None) for rid, it in batch.schedule.members]
        spans += [(batch.number, m.name, m.process.pid, us(m.start_ns), us(m.end_ns))
                  for m in batch.spans]  # fmt: skip
    return requests_in, spans


def _analysis_tables(db: sqlite3.Connection, recording: Recording) -> None:
    """The tables with rows (the analyser writes no empty frame), their views (the analyser's renamed
    columns) and data_table, which lists the views."""
    db.execute("CREATE TABLE data_table (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, view_name TEXT)")
    insight_curves.create_translate(db)
    for out in _outputs(recording):
        rows = list(out.rows)
        if not rows:
            continue
        _create(db, out.table, out.table_header, rows)
        if out.view:
            renamed = ", ".join(
                f"{_quoted(t)} AS {_quoted(v)}" for t, v in zip(out.table_header, out.view_header)
            )
            db.execute(f"CREATE VIEW {out.view} AS SELECT {renamed} FROM {out.table}")
            db.execute("INSERT INTO data_table (name, view_name) VALUES (?, ?)", (out.view, out.view))
            insight_curves.caption(db, out.view, insight_curves.TABLE_CAPTIONS[out.view])
    insight_curves.write_curves(db, recording)
    # forward rows name their requests by rid, the request table by http_rid
    _create(db, "data_link", ("source_name", "target_table", "target_name"), [("rid", "request", "http_rid")])


def write_db(recording: Recording, path: Path, formats: Sequence[str]) -> None:
    with replacing(path) as temp:
        db = sqlite3.connect(temp)
        try:
            db.execute("PRAGMA journal_mode = OFF")  # a new file, renamed into place once complete
            _trace_tables(db, recording)
            _analysis_tables(db, recording)
            if recording.api or recording.kernel:
                _copy(
                    db,
                    service_tables.API,
                    ((a.name, a.start_ns, a.end_ns, a.tid, a.correlation_id) for a in recording.api),
                )
                _copy(db, service_tables.KERNEL, (
                    (k.name, k.type, k.start_ns, k.end_ns, k.device, k.stream, k.correlation_id)
                    for k in recording.kernel
                ))  # fmt: skip
            db.commit()
        finally:
            db.close()
