"""Where a recording goes: ``Trace_Service/ms_service_<host>-<pid>.db`` (SQLite, WAL), written by a thread
of its own from a bounded queue, so the service's threads only append a tuple.

The tables are :data:`.schema.SERVICE_TABLES`. Rows the queue cannot take are counted, never blocked on,
and reported in ``meta`` (``dropped``) when the recording closes.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import sqlite3
import threading
import time
from typing import Any, Deque, Dict, List, Tuple

from . import schema

log = logging.getLogger("msmonitor_plugin")

QUEUE_CAPACITY = 500_000
FLUSH_S = 0.02
Row = Tuple[Any, ...]  # (table, column values...) as the API appends it
_INSERT = {t.name: t.insert() for t in schema.SERVICE_TABLES}
_STORED = {t.name: t.encoder() for t in schema.SERVICE_TABLES}


class ServiceStore:
    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, schema.db_name(schema.SERVICE_PREFIX))
        self.dropped = 0
        self.written = 0
        self._rows: Deque[Row] = collections.deque()
        self._closing = threading.Event()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        for table in schema.SERVICE_TABLES:
            self._db.execute(table.create())
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
