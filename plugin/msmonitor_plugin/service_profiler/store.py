"""Where a recording goes: ``Trace_Service/ms_service_<host>-<pid>.db`` (SQLite, WAL; MindIE 26.0's
tables, :data:`.service_tables.SERVICE_TABLES`), written off the service's threads, which only append a tuple.

The rows wait in a bounded queue of their own (one append per row: the API's cost); the monitor's
:class:`~..monitor.writers.WriterThread` writes them, every ``FLUSH_S``, and closes the file. The message
JSON of a slice is built here, on the writer's thread, not on the service's. Rows the queue cannot take
are counted, never blocked on, and reported in ``Meta`` (``dropped``) when the recording closes.

The API appends (:data:`Row`):

- ``("slice", name, domain, start_ns, end_ns, tid, attrs)``: an event (``end_ns == start_ns``) or a span;
- ``("counter", name, domain, ts_ns, values)``: host usage samples;
- ``("meta", name, value)``: ``add_meta_info``.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import socket
import sqlite3
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, Callable, Deque, Iterable, List, Set, Tuple

from msmonitor_contract import service_tables

from ..monitor.writers import WriterThread

log = logging.getLogger("msmonitor_plugin")

QUEUE_CAPACITY = 500_000
FLUSH_S = 0.02
Row = Tuple[Any, ...]  # (kind, values...) as listed above


class ServiceStore:
    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, service_tables.db_name(service_tables.SERVICE_PREFIX))
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
        self._pid = os.getpid()
        self._threads: Set[int] = set()  # registered in the thread table (MindIE: once per thread)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # as MindIE: a crash loses the tail, never the file
        for table in service_tables.SERVICE_TABLES:
            self._db.execute(table.create())
        self._threads.update(int(t) for (t,) in self._db.execute("SELECT track_id FROM thread"))
        pid = str(self._pid)
        self._db.execute(service_tables.PROCESS.insert("INSERT OR IGNORE"), (pid, pid, "", 0, ""))
        self._meta([("hostname", socket.gethostname()), ("ppid", str(os.getppid()))])
        self._db.commit()

    def _meta(self, pairs: Iterable[Tuple[str, Any]]) -> None:
        self._db.executemany(_META, ((name, _text(value), "") for name, value in pairs))

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
                self._meta([("dropped", dropped)])
                log.warning("service profiler: %d rows dropped (the writer fell behind)", dropped)
            self._db.commit()
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()

    def _write_queued(self) -> None:
        slices: List[Row] = []
        counters: List[Row] = []
        meta: List[Tuple[str, Any]] = []
        rows = self.rows
        for _ in range(len(rows)):
            row = rows.popleft()
            kind = row[0]
            if kind == "slice":
                slices.append(row)
            elif kind == "counter":
                counters.append(row)
            else:
                meta.append((row[1], row[2]))
        if not (slices or counters or meta):
            return
        self._db.executemany(_SLICE, self._slices(slices))
        self._db.executemany(_COUNTER, map(self._counter, counters))
        self._meta(meta)
        self._db.commit()
        self.written += len(slices) + len(counters) + len(meta)

    def _slices(self, rows: List[Row]) -> List[Tuple[Any, ...]]:
        """The slice table's rows (one pass: this is the writer's hot loop); a thread's first slice also
        registers it, its track named ``<domain>(<tid>)`` as MindIE names it."""
        pid, seen, threads = self._pid, self._threads, []
        values = []
        for _, name, domain, start, end, tid, attrs in rows:
            if tid not in seen:
                seen.add(tid)
                threads.append((tid, str(tid), str(pid), f"{domain}({tid})", 0))
            args = attrs if attrs.__class__ is str else _dumps(attrs)  # a str: mstx's, already a message
            values.append((start, end - start, name, 0, tid, domain, args, "", end, "", pid, tid))
        self._db.executemany(_THREAD, threads)
        return values

    def _counter(self, row: Row) -> Tuple[Any, ...]:
        _, name, domain, ts, values = row
        return (name, str(self._pid), ts, domain, _dumps(values))


def _text(value: Any) -> str:
    """A Meta value as text: strings as they are, anything else as ``str()`` (MindIE's ``str(meta_data)``)."""
    return value if isinstance(value, str) else str(value)


def _message_encoder() -> Callable[[Any], str]:
    """``json.dumps`` of a message, as MindIE's Profiler writes it; a value JSON cannot hold is written as
    its str() rather than losing the row. The C encoder is made once: ``json.dumps`` makes one per call,
    which costs more than the encoding (1.3 against 0.5 µs a message)."""
    if c_make_encoder is None:  # an interpreter without the C accelerator
        return json.JSONEncoder(default=str).encode
    encode = c_make_encoder({}, str, encode_basestring_ascii, None, ": ", ", ", False, False, True)
    return lambda message: "".join(encode(message, 0))


_dumps = _message_encoder()
_SLICE = service_tables.SLICE.insert()
_COUNTER = service_tables.COUNTER.insert()
_META = service_tables.META.insert()
_THREAD = service_tables.THREAD.insert("INSERT OR IGNORE")
