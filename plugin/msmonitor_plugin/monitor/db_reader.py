"""npu-monitor databases read back into :class:`~.records.Record` lists, and older files upgraded.

Two layouts are read: msMonitor's (``msprof_db``, what this plugin writes since issue 26, and what
msMonitor's C++ plugin writes), and this plugin's earlier one (``META_DATA.schema_version`` "1": a table
per kind, snake_case columns, string ids from 1), which MindStudio's analyser cannot read — ``upgrade``
rewrites such files in msMonitor's layout, under the same name. Anything else is refused with a
:class:`DbFileError` that says what the file is.

What msMonitor's layout does not keep comes back as it was written: an API call's ``type`` is gone (""),
NodeAPI reads back as API (both level 10000), marker flags as start (2) or instantaneous (1) — with device
(16 / 8) for device ranges — and a host record's stream as 0.

    python -m msmonitor_plugin.monitor.db_reader upgrade OLD.db... --into DIR
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
import urllib.parse
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence

from msmonitor_contract.activity import API_KINDS, HOST, MEMORY_KINDS, Kind

from .layouts import DATA_TYPES
from .msprof_db import SqliteWriter
from .msprof_schema import (
    API_LEVEL,
    EXTRA_TABLES,
    INVALID_DATA_TYPE,
    MSTX_CONNECTION_OFFSET,
    MSTX_MARKER,
    MSTX_TASK_TYPE,
    NA,
    NO_DEVICE,
    UNKNOWN,
)
from .records import CommunicationExtras, Extras, HcclExtras, HostExtras, MarkerExtras, MemoryExtras, Record

LEGACY_SCHEMA = "1"  # this plugin's own layout before issue 26
_API_KINDS = {level: kind for kind, level in API_LEVEL.items() if kind != Kind.NODE_API}


class DbFileError(ValueError):
    """A file that is not an npu-monitor database this reader knows."""


@dataclass
class DbFile:
    """One database's records and what wrote it."""

    path: str
    layout: str  # "msmonitor" or "legacy"
    meta: Dict[str, str]
    records: List[Record]

    @property
    def backend(self) -> str:
        return self.meta.get("backend", "")


def read(path: str) -> DbFile:
    """The records of *path* (either layout); DbFileError when it is neither."""
    if not os.path.isfile(path):
        raise DbFileError(f"{path}: no such file")
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"  # never creates, never writes
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            raise DbFileError(f"{path}: not an SQLite database ({exc})") from None
        meta = dict(db.execute("SELECT name, value FROM META_DATA")) if "META_DATA" in tables else {}
        strings = dict(db.execute("SELECT id, value FROM STRING_IDS")) if "STRING_IDS" in tables else {}
        if "SCHEMA_VERSION" in meta and {"TASK", "CANN_API", "MSTX_EVENTS"} <= tables:
            return DbFile(path, "msmonitor", meta, list(_msmonitor_records(db, strings, tables)))
        if meta.get("schema_version") == LEGACY_SCHEMA and "KERNEL" in tables:
            return DbFile(path, "legacy", meta, list(_legacy_records(db, strings, tables)))
    raise DbFileError(
        f"{path}: not an npu-monitor database: neither msMonitor's layout (META_DATA.SCHEMA_VERSION with"
        f" TASK, CANN_API and MSTX_EVENTS) nor this plugin's earlier one (schema_version {LEGACY_SCHEMA})"
    )


# -- msMonitor's layout -------------------------------------------------------------------------------


def _msmonitor_records(db: sqlite3.Connection, s: Dict[int, str], tables: set) -> Iterator[Record]:
    yield from _kernels(db, s)
    yield from _apis(db, s)
    yield from _communications(db, s)
    yield from _host_markers(db, s)
    yield from _device_markers(db, s)
    for kind, table in EXTRA_TABLES.items():
        if table.name in tables:
            yield from _extras(db, s, kind, table.name)


def _kernels(db: sqlite3.Connection, s: Dict[int, str]) -> Iterator[Record]:
    query = (
        "SELECT t.startNs, t.endNs, t.deviceId, t.streamId, t.connectionId, c.name, c.taskType"
        " FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId) ORDER BY t.globalTaskId"
    )
    for start, end, device, stream, connection, name, task_type in db.execute(query):
        yield Record(Kind.KERNEL, start, end, device, _stream(stream), connection, s[name], s[task_type])


def _apis(db: sqlite3.Connection, s: Dict[int, str]) -> Iterator[Record]:
    query = "SELECT startNs, endNs, type, globalTid, connectionId, name FROM CANN_API ORDER BY rowid"
    for start, end, level, tid, connection, name in db.execute(query):
        extras = HostExtras(tid >> 32, tid & 0xFFFFFFFF)
        yield Record(_API_KINDS.get(level, Kind.API), start, end, HOST, 0, connection, s[name], "", extras)


def _communications(db: sqlite3.Connection, s: Dict[int, str]) -> Iterator[Record]:
    query = (
        "SELECT startNs, endNs, connectionId, groupName, dataType, algType, count, opType, deviceId"
        " FROM COMMUNICATION_OP ORDER BY opId"
    )
    for start, end, connection, group, data_type, alg, count, name, device in db.execute(query):
        extras: Optional[CommunicationExtras] = None
        if (s[group], data_type, s[alg], count) != (NA, INVALID_DATA_TYPE, NA, UNKNOWN):  # torch: none
            extras = CommunicationExtras(count, DATA_TYPES.get(data_type, str(data_type)), s[group], s[alg])
        yield Record(Kind.COMMUNICATION, start, end, device, 0, connection, s[name], "", extras)


def _host_markers(db: sqlite3.Connection, s: Dict[int, str]) -> Iterator[Record]:
    query = (
        "SELECT startNs, endNs, eventType, message, globalTid, endGlobalTid, domainId, connectionId"
        " FROM MSTX_EVENTS ORDER BY rowid"
    )
    for start, end, event, message, tid, end_tid, domain, connection in db.execute(query):
        flag = 1 if event == MSTX_MARKER else 2
        ended_on = None if end_tid == tid else end_tid & 0xFFFFFFFF
        extras = MarkerExtras(
            s[domain],
            "Host",
            flag,
            connection - MSTX_CONNECTION_OFFSET,
            tid >> 32,
            tid & 0xFFFFFFFF,
            ended_on,
        )
        yield Record(Kind.MARKER, start, end, HOST, 0, 0, s[message], "", extras)


def _device_markers(db: sqlite3.Connection, s: Dict[int, str]) -> Iterator[Record]:
    """MsTx tasks, named after the host range of their connection id (as msMonitor pairs them); those on
    device -1 are their host range again (the writer's ``host_is_device``)."""
    mstx = next((i for i, v in s.items() if v == MSTX_TASK_TYPE), None)
    query = (
        "SELECT t.startNs, t.endNs, t.deviceId, t.streamId, t.connectionId, m.message, m.domainId,"
        " m.eventType FROM TASK t LEFT JOIN MSTX_EVENTS m USING (connectionId) WHERE t.taskType = ?"
        f" AND t.deviceId != {NO_DEVICE} ORDER BY t.globalTaskId"
    )
    for start, end, device, stream, connection, message, domain, event in db.execute(query, (mstx,)):
        flag = 8 if event == MSTX_MARKER else 16
        name, domain_name = (s[message], s[domain]) if message is not None else (NA, NA)
        extras = MarkerExtras(domain_name, "Device", flag, connection - MSTX_CONNECTION_OFFSET)
        yield Record(Kind.MARKER, start, end, device, stream, 0, name, "", extras)


def _extras(db: sqlite3.Connection, s: Dict[int, str], kind: Kind, table: str) -> Iterator[Record]:
    for row in db.execute(f"SELECT * FROM {table} ORDER BY rowid"):
        start, end, device, stream = row[:4]
        if kind == Kind.HCCL:
            name, comm, bandwidth = row[4:]
            yield Record(kind, start, end, device, stream, 0, s[name], "", HcclExtras(bandwidth, s[comm]))
            continue
        connection, name, size, last = row[4:]
        memory = MemoryExtras(size, last) if kind == Kind.MEMORY else MemoryExtras(size, 0, bool(last))
        yield Record(kind, start, end, device, stream, connection, s[name], "", memory)


def _stream(stream: int) -> int:
    return 0 if stream == UNKNOWN else stream


# -- this plugin's earlier layout ---------------------------------------------------------------------

# Each table of the earlier layout, and its kind.
_LEGACY_TABLES = {
    "KERNEL": Kind.KERNEL,
    "API": Kind.API,
    "ACL_API": Kind.ACL_API,
    "NODE_API": Kind.NODE_API,
    "RUNTIME_API": Kind.RUNTIME_API,
    "HCCL": Kind.HCCL,
    "COMMUNICATION": Kind.COMMUNICATION,
    "MARKER": Kind.MARKER,
    "MEMORY": Kind.MEMORY,
    "MEMSET": Kind.MEMSET,
    "MEMCPY": Kind.MEMCPY,
}


def _legacy_records(db: sqlite3.Connection, s: Dict[int, str], tables: set) -> Iterator[Record]:
    db.row_factory = sqlite3.Row
    for table, kind in _LEGACY_TABLES.items():
        if table in tables:
            for r in db.execute(f"SELECT * FROM {table} ORDER BY rowid"):
                yield _legacy_record(kind, r, s)


def _legacy_record(kind: Kind, r: sqlite3.Row, s: Dict[int, str]) -> Record:
    columns = r.keys()
    device, stream = (r["device_id"], r["stream_id"]) if "device_id" in columns else (HOST, 0)  # API: host
    correlation = r["correlation_id"] if "correlation_id" in columns else 0
    task_type = s[r["type_id"]] if kind == Kind.KERNEL else ""
    extras = _legacy_extras(kind, r, s)
    return Record(
        kind, r["start_ns"], r["end_ns"], device, stream, correlation, s[r["name_id"]], task_type, extras
    )


def _legacy_extras(kind: Kind, r: sqlite3.Row, s: Dict[int, str]) -> Extras:
    if kind in API_KINDS:
        return HostExtras(r["process_id"], r["thread_id"])
    if kind == Kind.COMMUNICATION:
        return CommunicationExtras(
            r["count"], s[r["data_type_id"]], s[r["comm_name_id"]], s[r["alg_type_id"]]
        )
    if kind == Kind.HCCL:
        return HcclExtras(r["bandwidth_gbps"], s[r["comm_name_id"]])
    if kind == Kind.MARKER:
        source, domain = s[r["source_id"]], s[r["domain_id"]]
        return MarkerExtras(domain, source, r["flag"], r["marker_id"], r["process_id"], r["thread_id"])
    if kind == Kind.MEMORY:
        return MemoryExtras(r["bytes"], r["address"])
    if kind in MEMORY_KINDS:
        return MemoryExtras(r["bytes"], 0, bool(r["is_async"]))
    return None


# -- upgrade ------------------------------------------------------------------------------------------


class _Upgraded(SqliteWriter):
    """Writes an earlier file again in msMonitor's layout, under the earlier file's name."""

    def __init__(self, name: str, directory: str, pid: int, rank: int, backend: str) -> None:
        self._name = name
        super().__init__(directory, pid, rank, backend)

    def file_name(self) -> str:
        return self._name


def upgrade(path: str, into: str) -> str:
    """Rewrite an earlier file in msMonitor's layout under the same name in *into*; returns its path."""
    old = read(path)
    if old.layout != "legacy":
        raise DbFileError(f"{path}: already in msMonitor's layout")
    name = os.path.basename(path)
    target = os.path.join(into, name)
    if os.path.exists(target):
        raise DbFileError(f"{target}: exists; not replaced")
    pid, rank = int(old.meta.get("pid", "0")), int(old.meta.get("rank", "-1"))
    writer = _Upgraded(name, into, pid, rank, old.backend)
    writer.write(old.records)
    writer.close()
    return writer.path


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m msmonitor_plugin.monitor.db_reader",
        description="Rewrite earlier msmonitor-plugin npu-monitor databases in msMonitor's layout.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("upgrade", help="rewrite each FILE under the same name in --into")
    up.add_argument("files", nargs="+", metavar="FILE")
    up.add_argument("--into", required=True, metavar="DIR")
    args = parser.parse_args(argv)
    os.makedirs(args.into, exist_ok=True)
    failed = 0
    for path in args.files:
        try:
            print(upgrade(path, args.into))
        except DbFileError as exc:
            print(f"db_reader: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
