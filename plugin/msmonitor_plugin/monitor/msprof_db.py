"""``--export-type DB``: one monitoring session's records written into msMonitor's npu-monitor database
(:mod:`.msprof_schema` says which record goes into which table, and how).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from typing import Callable, Dict, List, Sequence, Set, Tuple

from msmonitor_contract.activity import HOST, Kind
from msmonitor_contract.numbers import strict_int

from .layouts import DATA_TYPES
from .markers import FLAG_INSTANT, FLAG_INSTANT_DEV
from .msprof_schema import (
    API_LEVEL,
    API_LEVELS,
    CANN_API,
    COMMUNICATION_OP,
    COMPUTE_TASK_INFO,
    ENUM_API_TYPE,
    ENUM_HCCL_DATA_TYPE,
    ENUM_MSTX_EVENT_TYPE,
    EXTRA_TABLES,
    HCCL_DATA_TYPES,
    HOST_INFO,
    INVALID_DATA_TYPE,
    KERNEL_NA_TEXTS,
    META_DATA,
    MSMONITOR_TABLES,
    MSTX_CONNECTION_OFFSET,
    MSTX_EVENT_TYPES,
    MSTX_EVENTS,
    MSTX_MARKER,
    MSTX_RANGE,
    MSTX_TASK_TYPE,
    NA,
    NO_DEVICE,
    NPU_INFO,
    PRODUCER,
    RANK_DEVICE_MAP,
    SCHEMA_VERSION,
    SESSION_TIME_INFO,
    STRING_IDS,
    TASK,
    UNKNOWN,
    calc_hash_id,
    global_tid,
    host_uid,
)
from .records import CommunicationExtras, HcclExtras, HostExtras, MarkerExtras, MemoryExtras, Record
from .writers import file_name

_DATA_TYPE_ID = {name: number for number, name in DATA_TYPES.items()}
_INSTANT_FLAGS = (FLAG_INSTANT, FLAG_INSTANT_DEV)


class _Batch:
    """The rows of one write, per INSERT statement."""

    def __init__(self) -> None:
        self.rows: Dict[str, List[tuple]] = {}

    def of(self, insert: str) -> List[tuple]:
        rows = self.rows.get(insert)
        if rows is None:
            rows = self.rows[insert] = []
        return rows


class SqliteWriter:
    """One database per monitoring session, in msMonitor's schema (see :mod:`.msprof_schema`)."""

    ext = "db"

    def __init__(
        self, directory: str, pid: int, rank: int, backend: str = "", host_is_device: bool = False
    ) -> None:
        """A new file in *directory*, named by :meth:`file_name`; *host_is_device*: the backend's
        ``host_is_device``."""
        self.host_is_device = host_is_device
        self.pid = pid
        self.rank = rank
        self.start_ns = time.time_ns()
        self.path = os.path.join(directory, self.file_name())
        self.files = [self.path]
        self.devices: Set[int] = set()
        self._strings: Dict[str, int] = {}
        self._new_strings: List[Tuple[int, str]] = []
        self._task_id = 0
        self._op_id = 0
        self._groups: Dict[str, Tuple[str, int]] = {}  # group -> (its 3 hash digits, ops so far)
        self._extra: Set[Kind] = set()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=OFF")  # as msMonitor: monitoring data, not a ledger
        na = self._intern(NA)
        # What msMonitor leaves unknown, as literals. A task: contextId, taskId, modelId; a compute task:
        # its block numbers, and every text but name and taskType; a marker: rangeId and category.
        self._task_sql = TASK.insert_with(globalPid=pid, contextId=UNKNOWN, taskId=UNKNOWN, modelId=UNKNOWN)
        na_texts = dict.fromkeys(KERNEL_NA_TEXTS, na)
        self._info_sql = COMPUTE_TASK_INFO.insert_with(blockNum=UNKNOWN, mixBlockNum=UNKNOWN, **na_texts)
        self._mstx_sql = MSTX_EVENTS.insert_with(rangeId=UNKNOWN, category=UNKNOWN)
        self._create(backend)

    def file_name(self) -> str:
        """The file's name, as msMonitor names it."""
        return file_name(self.pid, self.start_ns // 1_000_000, self.rank, self.ext)

    def _create(self, backend: str) -> None:
        db = self._db
        for table in MSMONITOR_TABLES:
            db.execute(table.create_sql)
        db.executemany(ENUM_API_TYPE.insert_sql, API_LEVELS)
        db.executemany(ENUM_MSTX_EVENT_TYPE.insert_sql, MSTX_EVENT_TYPES)
        db.executemany(ENUM_HCCL_DATA_TYPE.insert_sql, HCCL_DATA_TYPES)
        meta = [
            ("SCHEMA_VERSION_MICRO", "1"),  # sic: msMonitor's three keys disagree with its SCHEMA_VERSION
            ("SCHEMA_VERSION_MINOR", "2"),
            ("SCHEMA_VERSION_MAJOR", "0"),
            ("SCHEMA_VERSION", SCHEMA_VERSION),
            ("producer", PRODUCER),
            ("backend", backend),
        ]
        db.executemany(META_DATA.insert_sql, meta)
        db.execute(HOST_INFO.insert_sql, (host_uid(), socket.gethostname()))
        self._flush_strings()
        db.commit()

    def _intern(self, text: str) -> int:
        sid = self._strings.get(text)
        if sid is None:
            sid = self._strings[text] = len(self._strings)
            self._new_strings.append((sid, text))
        return sid

    def _flush_strings(self) -> None:
        if self._new_strings:
            self._db.executemany(STRING_IDS.insert_sql, self._new_strings)
            self._new_strings = []

    def write(self, records: Sequence[Record]) -> None:
        batch = _Batch()
        for kind, same_kind in _by_kind(records).items():
            if kind == Kind.KERNEL:
                self._kernels(same_kind, batch)
            elif kind in API_LEVEL:
                self._apis(same_kind, API_LEVEL[kind], batch)
            elif kind == Kind.COMMUNICATION:
                self._communications(same_kind, batch)
            elif kind == Kind.MARKER:
                self._markers(same_kind, batch)
            else:
                self._extras(kind, same_kind, batch)
        for insert, rows in batch.rows.items():
            self._db.executemany(insert, rows)
        self._flush_strings()
        self._db.commit()

    def _kernels(self, records: List[Record], batch: _Batch) -> None:
        strings, intern = self._strings, self._intern
        tasks, infos = batch.of(self._task_sql), batch.of(self._info_sql)
        task_id = self._task_id
        devices = self.devices
        for r in records:
            name = strings.get(r.name)
            if name is None:
                name = intern(r.name)
            task_type = strings.get(r.type)
            if task_type is None:
                task_type = intern(r.type)
            device = r.device
            devices.add(device)
            infos.append((name, task_id, task_type))
            stream = UNKNOWN if device == HOST else r.stream  # host operators have no stream
            tasks.append((r.start_ns, r.end_ns, device, r.correlation_id, task_id, task_type, stream))
            task_id += 1
        self._task_id = task_id

    def _apis(self, records: List[Record], level: int, batch: _Batch) -> None:
        strings, intern = self._strings, self._intern
        unknown_thread = global_tid(self.pid, UNKNOWN)
        rows = batch.of(CANN_API.insert_sql)
        for r in records:
            name = strings.get(r.name)
            if name is None:
                name = intern(r.name)
            x = r.extras
            tid = (x.process_id << 32) | x.thread_id if isinstance(x, HostExtras) else unknown_thread
            rows.append((r.start_ns, r.end_ns, level, tid, r.correlation_id, name))

    def _communications(self, records: List[Record], batch: _Batch) -> None:
        intern = self._intern
        rows = batch.of(COMMUNICATION_OP.insert_sql)
        for r in records:
            x = r.extras
            if isinstance(x, CommunicationExtras):
                group, data_type, alg, count = x.comm_name, _data_type_id(x.data_type), x.alg_type, x.count
            else:  # the torch backend's c10d calls: no group, type, algorithm or count
                group, data_type, alg, count = NA, INVALID_DATA_TYPE, NA, UNKNOWN
            op_name = intern(self._op_name(r.name, group))
            where = (op_name, r.start_ns, r.end_ns, r.correlation_id, intern(group), self._op_id)
            what = (0, 0, data_type, intern(alg), count, intern(r.name), r.device)  # relay, retry: none
            rows.append((*where, *what))
            self._op_id += 1
            self.devices.add(r.device)

    def _op_name(self, name: str, group: str) -> str:
        """msMonitor's opName: the ops of one group numbered in order, the group told by its hash."""
        digits, count = self._groups.get(group) or (str(calc_hash_id(group))[-3:], 0)
        self._groups[group] = (digits, count + 1)
        return f"{name}_{digits}_{count}_1"

    def _markers(self, records: List[Record], batch: _Batch) -> None:
        intern = self._intern
        for r in records:
            x = r.extras
            if not isinstance(x, MarkerExtras):
                continue
            connection = x.id + MSTX_CONNECTION_OFFSET
            if x.source == "Host":
                tid = global_tid(x.process_id, x.thread_id)
                end_tid = tid if x.end_thread_id is None else global_tid(x.process_id, x.end_thread_id)
                event = MSTX_MARKER if x.flag in _INSTANT_FLAGS else MSTX_RANGE
                what = (event, intern(r.name), tid, end_tid, intern(x.domain), connection)
                batch.of(self._mstx_sql).append((r.start_ns, r.end_ns, *what))
                if self.host_is_device and event == MSTX_RANGE:
                    self._mstx_task(r, NO_DEVICE, UNKNOWN, connection, batch)
            else:
                self._mstx_task(r, r.device, r.stream, connection, batch)
                self.devices.add(r.device)

    def _mstx_task(self, r: Record, device: int, stream: int, connection: int, batch: _Batch) -> None:
        """A device range: a task on its stream, joined to the host range by the connection id."""
        task = (r.start_ns, r.end_ns, device, connection, self._task_id, self._intern(MSTX_TASK_TYPE))
        batch.of(self._task_sql).append((*task, stream))
        self._task_id += 1

    def _extras(self, kind: Kind, records: List[Record], batch: _Batch) -> None:
        table = EXTRA_TABLES[kind]
        if kind not in self._extra:
            self._db.execute(table.create_sql)
            self._extra.add(kind)
        rows = batch.of(table.insert_sql)
        for r in records:
            self.devices.add(r.device)
            rows.append(_extra_row(r, self._intern))

    def flush(self) -> None:
        self._db.commit()

    def close(self) -> None:
        devices = sorted(self.devices - {HOST}) or [NO_DEVICE]
        db = self._db
        db.execute(SESSION_TIME_INFO.insert_sql, (self.start_ns, time.time_ns()))
        db.executemany(RANK_DEVICE_MAP.insert_sql, [(self.rank, d) for d in devices])
        db.executemany(NPU_INFO.insert_sql, [(d, "UNKNOWN") for d in devices])
        db.commit()
        db.close()


def _by_kind(records: Sequence[Record]) -> Dict[Kind, List[Record]]:
    out: Dict[Kind, List[Record]] = {}
    for r in records:
        same_kind = out.get(r.kind)
        if same_kind is None:
            same_kind = out[r.kind] = []
        same_kind.append(r)
    return out


def _data_type_id(name: str) -> int:
    number = _DATA_TYPE_ID.get(name)
    if number is not None:
        return number
    number = strict_int(name)  # layouts names an unknown number by itself
    return INVALID_DATA_TYPE if number is None else number


def _extra_row(r: Record, intern: Callable[[str], int]) -> tuple:
    x = r.extras
    head = (r.start_ns, r.end_ns, r.device, r.stream)
    if isinstance(x, HcclExtras):
        return (*head, intern(r.name), intern(x.comm_name), x.bandwidth_gbps)
    memory = x if isinstance(x, MemoryExtras) else MemoryExtras(0)
    last = memory.address if r.kind == Kind.MEMORY else int(memory.is_async)
    return (*head, r.correlation_id, intern(r.name), memory.bytes, last)
