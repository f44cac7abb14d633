"""Where a recording goes: ``Trace_Service/ms_service_<host>-<pid>.db`` (SQLite, WAL), written by a thread
of its own from a bounded queue, so the service's threads only append a tuple.

Tables (appended across enable cycles, as MindIE's ``CREATE TABLE IF NOT EXISTS``): ``meta``, ``spans``,
``events``, ``metrics``, ``links``. Times are epoch nanoseconds; ``rid`` is the request id as given, or a
JSON array for a batch; ``attrs`` a JSON object. Rows the queue cannot take are counted, never blocked on,
and reported in ``meta`` (``dropped``) when the recording closes.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import socket
import sqlite3
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Tuple

log = logging.getLogger("msmonitor_plugin")

QUEUE_CAPACITY = 500_000
FLUSH_S = 0.02
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT NOT NULL, value TEXT NOT NULL, ts_ns INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS spans (name TEXT, domain TEXT, start_ns INTEGER, end_ns INTEGER, tid INTEGER,"
    " rid TEXT, attrs TEXT)",
    "CREATE TABLE IF NOT EXISTS events (name TEXT, domain TEXT, ts_ns INTEGER, tid INTEGER, rid TEXT,"
    " attrs TEXT)",
    "CREATE TABLE IF NOT EXISTS metrics (name TEXT, domain TEXT, ts_ns INTEGER, tid INTEGER, rid TEXT,"
    " value REAL, kind TEXT, scope TEXT)",
    "CREATE TABLE IF NOT EXISTS links (from_rid TEXT, to_rid TEXT, domain TEXT, ts_ns INTEGER)",
)
_INSERT = {
    "meta": "INSERT INTO meta VALUES (?, ?, ?)",
    "spans": "INSERT INTO spans VALUES (?, ?, ?, ?, ?, ?, ?)",
    "events": "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
    "metrics": "INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "links": "INSERT INTO links VALUES (?, ?, ?, ?)",
}
Row = Tuple[Any, ...]  # (table, column values...) as the API appends it


def db_name(kind: str) -> str:
    """``ms_service_<host>-<pid>.db`` (kind ``ms_service``) or ``ascend_service_profiler_...``."""
    return f"{kind}_{socket.gethostname()}-{os.getpid()}.db"


def text(value: Any) -> str:
    """A request id or attribute bag as stored: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


class ServiceStore:
    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, db_name("ms_service"))
        self.dropped = 0
        self.written = 0
        self._rows: Deque[Row] = collections.deque()
        self._closing = threading.Event()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        for statement in SCHEMA:
            self._db.execute(statement)
        now = time.time_ns()
        self._db.executemany(
            _INSERT["meta"], [("hostname", socket.gethostname(), now), ("pid", str(os.getpid()), now)]
        )
        self._db.commit()
        self._thread = threading.Thread(target=self._run, name="msmonitor-service-store", daemon=True)
        self._thread.start()

    @property
    def backlog(self) -> int:
        return len(self._rows)

    def put(self, row: Row) -> None:
        """From any thread: append, or count it dropped when the writer is that far behind."""
        if len(self._rows) >= QUEUE_CAPACITY:
            self.dropped += 1
            return
        self._rows.append(row)

    def close(self) -> None:
        """Write what is queued, note the drops, checkpoint and close (the -wal file goes away)."""
        self._closing.set()
        self._thread.join(timeout=30.0)
        try:
            if self.dropped:
                self._db.execute(_INSERT["meta"], ("dropped", str(self.dropped), time.time_ns()))
                log.warning("service profiler: %d rows dropped (the writer fell behind)", self.dropped)
            self._db.commit()
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()

    def _run(self) -> None:
        while True:
            closing = self._closing.wait(FLUSH_S)
            try:
                self._write_batch()
            except sqlite3.Error:
                log.exception("service profiler: writing %s failed", self.path)
            if closing:
                return

    def _write_batch(self) -> None:
        batch: Dict[str, List[Row]] = {}
        rows = self._rows
        for _ in range(len(rows)):
            row = rows.popleft()
            batch.setdefault(row[0], []).append(row[1:])
        for table, values in batch.items():
            self._db.executemany(_INSERT[table], map(_STORED[table], values))
            self.written += len(values)
        if batch:
            self._db.commit()


def _rid(value: Any) -> str:
    return value if type(value) is str else text(value)


def _attrs(value: Any) -> str:
    return text(value) if value else "{}"


# Per table, the row as SQLite takes it: request ids of a batch and attribute bags as JSON text.
_STORED: Dict[str, Callable[[Row], Row]] = {
    "events": lambda r: (r[0], r[1], r[2], r[3], _rid(r[4]), _attrs(r[5])),
    "spans": lambda r: (r[0], r[1], r[2], r[3], r[4], _rid(r[5]), _attrs(r[6])),
    "metrics": lambda r: (r[0], r[1], r[2], r[3], _rid(r[4]), r[5], r[6], r[7]),
    "links": lambda r: (_rid(r[0]), _rid(r[1]), r[2], r[3]),
    "meta": lambda r: (r[0], _rid(r[1]), r[2]),
}
