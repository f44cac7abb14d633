"""``--log-file`` mode: the records themselves, per process, as JSONL (rotating) or SQLite (``msprof_db``).

Files are named as msMonitor names them: ``msmonitor_{pid}_{YYYYmmddHHMMSSmmm}_{rank}.{jsonl,db}`` (local
time, milliseconds; a rotated JSONL file gets a strictly later stamp).

JSONL: one JSON object per line, with msMonitor's keys (``kind``, ``name``, ``startNs``, ``endNs``, ids…;
see docs/monitoring.md), and a ``rank_device_map`` line at the end of the session (its device list empty
on CPU). Rotation follows msMonitor's ``RotateLogger``: a new file every ``lines`` lines (default 10000,
range [100, 500000]); with ``files`` ≥ 2 the oldest files are removed so that at most ``files`` exist,
with -1 (default) all are kept.

Writing happens on a :class:`WriterThread` with a bounded queue (``MSMONITOR_JSONL_BUFFER_CAPACITY``
records, power of two in [2^13, 2^21], default 2^19); when it is full, records are dropped and counted.
Files are flushed at least every ``MSMONITOR_JSONL_MAX_DUMP_INTERVAL`` ms (≥ 1000, default 30000).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from msmonitor_contract.activity import API_KINDS, HOST, Kind
from msmonitor_contract.vocabulary import timestamp

from .records import CommunicationExtras, HcclExtras, HostExtras, MarkerExtras, MemoryExtras, Record

log = logging.getLogger("msmonitor_plugin")

DEFAULT_LINES, MIN_LINES, MAX_LINES = 10000, 100, 500000
KEEP_ALL_FILES, MIN_FILES = -1, 2
DEFAULT_CAPACITY, MIN_CAPACITY, MAX_CAPACITY = 1 << 19, 1 << 13, 1 << 21
DEFAULT_DUMP_MS, MIN_DUMP_MS = 30000, 1000


def file_name(pid: int, ms: int, rank: int, ext: str) -> str:
    return f"msmonitor_{pid}_{timestamp(ms)}_{rank}.{ext}"


def _env_int(env: Mapping[str, str], name: str) -> Optional[int]:
    value = env.get(name, "").strip()
    try:
        return int(value) if value else None
    except ValueError:
        log.warning("%s=%r is not an integer: ignored", name, value)
        return None


def rotation(
    lines: Optional[int], files: Optional[int], env: Mapping[str, str] = os.environ
) -> Tuple[int, int]:
    """Lines per file and files kept: the command's values, else the environment's, else defaults.

    Environment values out of range are clamped (lines) or ignored (files), as msMonitor does.
    """
    if lines is None:
        lines = _env_int(env, "MSMONITOR_JSONL_ROTATE_LOG_LINES")
        lines = DEFAULT_LINES if lines is None else min(max(lines, MIN_LINES), MAX_LINES)
    if files is None:
        files = _env_int(env, "MSMONITOR_JSONL_ROTATE_LOG_FILES")
        if files is None or not (files == KEEP_ALL_FILES or files >= MIN_FILES):
            files = KEEP_ALL_FILES
    return lines, files


def queue_capacity(env: Mapping[str, str] = os.environ) -> int:
    value = _env_int(env, "MSMONITOR_JSONL_BUFFER_CAPACITY")
    if value is None or value <= 0 or value & (value - 1):
        return DEFAULT_CAPACITY
    return min(max(value, MIN_CAPACITY), MAX_CAPACITY)


def dump_interval_s(env: Mapping[str, str] = os.environ) -> float:
    value = _env_int(env, "MSMONITOR_JSONL_MAX_DUMP_INTERVAL")
    return (value if value is not None and value >= MIN_DUMP_MS else DEFAULT_DUMP_MS) / 1000


def _device_of(r: Record) -> Optional[int]:
    return r.device if r.device != HOST else None


def record_json(r: Record) -> Dict[str, Any]:
    """A record as msMonitor's JSONL exporter writes it (its keys; Hccl and memory kinds are ours)."""
    out: Dict[str, Any] = {"kind": r.kind.label}
    x = r.extras
    if isinstance(x, MarkerExtras):
        out.update(sourceKind=x.source, name=r.name, startNs=r.start_ns, endNs=r.end_ns, domain=x.domain)
        if x.source == "Host":
            out.update(processId=x.process_id, threadId=x.thread_id)
        else:
            out.update(deviceId=r.device, streamId=r.stream)
        out["id"] = x.id
        return out
    out.update(name=r.name, startNs=r.start_ns, endNs=r.end_ns)
    if r.kind in API_KINDS:
        host = x if isinstance(x, HostExtras) else HostExtras(0, 0)
        out.update(processId=host.process_id, threadId=host.thread_id)
    else:
        out.update(deviceId=r.device, streamId=r.stream)
    if r.kind == Kind.KERNEL:
        out["type"] = r.type
    elif isinstance(x, CommunicationExtras):
        out.update(dataType=x.data_type, count=x.count, commName=x.comm_name, algType=x.alg_type)
    elif isinstance(x, HcclExtras):
        out.update(bandwidth=x.bandwidth_gbps, commName=x.comm_name)
    elif isinstance(x, MemoryExtras):
        out.update(bytes=x.bytes, address=x.address, isAsync=x.is_async)
    if r.kind != Kind.HCCL:
        out["correlationId"] = r.correlation_id
    return out


class JsonlWriter:
    """Rotating JSONL files of records (see the module docstring for the rotation rules)."""

    ext = "jsonl"

    def __init__(
        self, directory: str, pid: int, rank: int, lines: int = DEFAULT_LINES, files: int = -1
    ) -> None:
        self.directory = directory
        self.pid = pid
        self.rank = rank
        self.max_lines = lines
        self.max_files = files
        self.files: List[str] = []
        self.devices: Set[int] = set()
        self._file: Optional[Any] = None
        self._lines = 0
        self._last_ms = 0

    @property
    def path(self) -> str:
        return self.files[-1] if self.files else ""

    def write(self, records: Sequence[Record]) -> None:
        for r in records:
            device = _device_of(r)
            if device is not None:
                self.devices.add(device)
            self._line(json.dumps(record_json(r), separators=(",", ":"), ensure_ascii=False))

    def _line(self, text: str) -> None:
        if self._file is None or self._lines >= self.max_lines:
            self._rotate()
        assert self._file is not None
        self._file.write(text + "\n")
        self._lines += 1

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.max_files > 0:
            self._remove_oldest()
        ms = max(int(time.time() * 1000), self._last_ms + 1)
        self._last_ms = ms
        path = os.path.join(self.directory, file_name(self.pid, ms, self.rank, self.ext))
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (kept open across writes)
        self._lines = 0
        self.files.append(path)

    def _remove_oldest(self) -> None:
        self.files = [f for f in self.files if os.path.exists(f)]
        if len(self.files) < self.max_files:
            return
        self.files.sort(key=os.path.getmtime)
        excess = len(self.files) - self.max_files + 1
        for path in self.files[:excess]:
            try:
                os.remove(path)
            except OSError as exc:
                log.warning("could not remove rotated monitor file %s: %s", path, exc)
        del self.files[:excess]

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        # The session's last line, on CPU too (no device seen: an empty list); a session that wrote no
        # record has no file to end.
        if self.files:
            rank_map = {"kind": "rank_device_map", "rank": self.rank, "device": sorted(self.devices)}
            self._line(json.dumps(rank_map, separators=(",", ":")))
        if self._file is not None:
            self._file.close()
            self._file = None


class WriterThread:
    """Writes record batches off the monitoring threads; bounded, never blocks the producer."""

    def __init__(
        self, writer: Any, capacity: int = DEFAULT_CAPACITY, flush_s: float = DEFAULT_DUMP_MS / 1000
    ) -> None:
        self.writer = writer
        self.capacity = capacity
        self.flush_s = flush_s
        self.dropped = 0
        self.errors = 0
        self._queued = 0
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="msmonitor-writer", daemon=True)
        self._thread.start()

    def put(self, records: List[Record]) -> None:
        if not records:
            return
        with self._lock:
            if self._queued + len(records) > self.capacity:
                self.dropped += len(records)
                return
            self._queued += len(records)
        self._queue.put(records)

    def _run(self) -> None:
        last_flush = time.monotonic()
        while True:
            try:
                batch = self._queue.get(timeout=self.flush_s)
            except queue.Empty:
                batch = []
            if batch is None:
                break
            self._write(batch)
            if time.monotonic() - last_flush >= self.flush_s:
                self._guard(self.writer.flush)
                last_flush = time.monotonic()

    def _write(self, batch: List[Record]) -> None:
        if batch:
            with self._lock:
                self._queued -= len(batch)
            self._guard(lambda: self.writer.write(batch))

    def _guard(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception:  # a full disk must not kill the thread: count, log once per error
            self.errors += 1
            log.exception("monitor file write failed")

    def close(self) -> None:
        """Write everything queued, then close the files."""
        self._queue.put(None)
        self._thread.join()
        self._guard(self.writer.close)
