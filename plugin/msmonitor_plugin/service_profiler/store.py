"""Where a recording goes: ``Trace_Service/ms_service_<host>-<pid>.db`` (SQLite, WAL; the tables are
:data:`.schema.SERVICE_TABLES`), written off the service's threads, which only append a tuple.

The rows wait in a bounded queue of their own (one append per row: the API's cost); the monitor's
:class:`~..monitor.writers.WriterThread` writes them, every ``FLUSH_S``, and closes the file. Rows the
queue cannot take are counted, never blocked on, and reported in ``meta`` (``dropped``) when the
recording closes.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import sqlite3
import time
from typing import Any, Callable, Deque, Dict, List, Tuple

from ..monitor.writers import WriterThread
from . import schema

log = logging.getLogger("msmonitor_plugin")

QUEUE_CAPACITY = 500_000
FLUSH_S = 0.02
Row = Tuple[Any, ...]  # (table, column values...) as the API appends it


class ServiceStore:
    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, schema.db_name(schema.SERVICE_PREFIX))
        self.dropped = 0
        self._file = _RecordingFile(self.path, lambda: self.dropped)
        self._rows = self._file.rows
        self._writer = WriterThread(self._file, capacity=QUEUE_CAPACITY, flush_s=FLUSH_S)

    @property
    def backlog(self) -> int:
        return len(self._rows)

    @property
    def written(self) -> int:
        return self._file.written

    def put(self, row: Row) -> None:
        """From any thread: append, or count it dropped when the writer is that far behind."""
        if len(self._rows) >= QUEUE_CAPACITY:
            self.dropped += 1
            return
        self._rows.append(row)

    def close(self) -> None:
        """Write what is queued, note the drops, checkpoint and close (the -wal file goes away)."""
        self._writer.close()


class _RecordingFile:
    """The database and the rows queued for it. The writer thread only flushes and closes it (it is put
    no batches: the service's threads append to :attr:`rows`, cheaper than a put per row)."""

    def __init__(self, path: str, dropped: Callable[[], int]) -> None:
        self.path = path
        self.rows: Deque[Row] = collections.deque()
        self.written = 0
        self._dropped = dropped
        self._insert = {t.name: t.insert() for t in schema.SERVICE_TABLES}
        self._encode = {t.name: t.encoder() for t in schema.SERVICE_TABLES}
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        for table in schema.SERVICE_TABLES:
            self._db.execute(table.create())
        now = time.time_ns()
        self._db.executemany(
            self._insert["meta"], [("hostname", socket.gethostname(), now), ("pid", str(os.getpid()), now)]
        )
        self._db.commit()

    def flush(self) -> None:
        try:
            self._write_queued()
        except sqlite3.Error:
            log.exception("service profiler: writing %s failed", self.path)

    def close(self) -> None:
        self.flush()
        try:
            dropped = self._dropped()
            if dropped:
                self._db.execute(self._insert["meta"], ("dropped", str(dropped), time.time_ns()))
                log.warning("service profiler: %d rows dropped (the writer fell behind)", dropped)
            self._db.commit()
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()

    def _write_queued(self) -> None:
        batch: Dict[str, List[Row]] = {}
        rows = self.rows
        for _ in range(len(rows)):
            row = rows.popleft()
            batch.setdefault(row[0], []).append(row[1:])
        for table, values in batch.items():
            self._db.executemany(self._insert[table], map(self._encode[table], values))
            self.written += len(values)
        if batch:
            self._db.commit()
