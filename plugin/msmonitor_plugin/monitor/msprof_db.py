"""``--export-type DB``: msMonitor's npu-monitor database, in msprof's SQLite schema.

MindStudio's cluster analyser (``msprof-analyze cluster -d DIR -m compute_op_sum|cann_api_sum|mstx_sum|
hccl_sum|slow_rank``) reads ``msmonitor_<pid>_<YYYYMMDDhhmmssmmm>_<rank>.db`` files as one rank's profiler
database each, so the tables, columns, string interning, enums and constant rows are msMonitor's
(``plugin/ipc_monitor/db`` in its public source), not ours:

==================  ==========================================================================
record              rows
==================  ==========================================================================
Kernel              TASK + COMPUTE_TASK_INFO, joined by globalTaskId (a counter per file)
API kinds           CANN_API, ``type`` the API level (ENUM_API_TYPE): API and NodeAPI 10000,
                    AclAPI 20000, RuntimeAPI 5000; globalTid = pid << 32 | tid
Communication       COMMUNICATION_OP; opName ``<name>_<3 digits of the group's hash>_<n-th op of
                    the group>_1``, opType the name, dataType an ENUM_HCCL_DATA_TYPE id
Marker, host        MSTX_EVENTS, eventType 0 (instantaneous) or 2 (start/end), connectionId the
                    marker id + 4000000000
Marker, device      TASK with taskType ``MsTx`` and the host range's connectionId
Marker, host, when  also a TASK (``MsTx``, device -1) with the range's connectionId: torch on a
the host is the     CPU-only machine, whose Kernel kind is the CPU's operators (and mstx_sum fails
device              on a rank none of whose ranges has a device part)
Hccl, Memory,       not written by msMonitor; kept here in tables of their own (HCCL, MEMORY,
MemSet, MemCpy      MEMSET, MEMCPY), made when the first such record comes
==================  ==========================================================================

Every text is an id into ``STRING_IDS`` (ids from 0, as msMonitor's pool). A value the source does not
have is written as msMonitor writes it: ``N/A`` in text columns, 4294967295 (UINT32_MAX) in integer
ones, device -1 for host work, dataType INVALID_TYPE. The constant tables (enums, META_DATA,
HOST_INFO) are written at open, SESSION_TIME_INFO, RANK_DEVICE_MAP and NPU_INFO at close. Unlike
msMonitor, every table exists from the start, so a reader finds an empty table rather than none.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Set, Tuple

from msmonitor_contract.activity import HOST, Kind

from .layouts import DATA_TYPES
from .records import CommunicationExtras, HcclExtras, HostExtras, MarkerExtras, MemoryExtras, Record
from .writers import file_name

UNKNOWN = 0xFFFFFFFF  # msMonitor's value for an integer it does not have (UINT32_MAX)
NA = "N/A"  # ... and for a text
NO_DEVICE = -1  # msMonitor's INVALID_DEVICE_ID: host work, and RANK_DEVICE_MAP/NPU_INFO without devices
MSTX_CONNECTION_OFFSET = 4_000_000_000  # a marker's connectionId: its id + this
MSTX_TASK_TYPE = "MsTx"
INVALID_DATA_TYPE = 0xFFFF
SCHEMA_VERSION = "1.2.0"  # msMonitor's META_DATA, as of b942bf5

# ENUM_API_TYPE: the API level of each kind, and the levels msMonitor lists.
API_LEVEL = {Kind.API: 10000, Kind.NODE_API: 10000, Kind.ACL_API: 20000, Kind.RUNTIME_API: 5000}
API_LEVELS = (
    (5000, "runtime"),
    (5500, "communication"),
    (10000, "node"),
    (15000, "model"),
    (20000, "acl"),
    (50001, "op"),
    (50002, "queue"),
    (50003, "trace"),
    (50004, "mstx"),
)
MSTX_MARKER, MSTX_RANGE = 0, 2
MSTX_EVENT_TYPES = ((0, "marker"), (1, "push/pop"), (2, "start/end"), (3, "marker_ex"))
# MSPTI's data type numbers with msMonitor's names (ours call the invalid one "INVALID").
HCCL_DATA_TYPES = tuple(
    (number, "INVALID_TYPE" if number == INVALID_DATA_TYPE else name) for number, name in DATA_TYPES.items()
)
_DATA_TYPE_ID = {name: number for number, name in DATA_TYPES.items()}
_INSTANT_FLAGS = (1, 8)  # msptiActivityFlag MARKER_INSTANTANEOUS, ..._WITH_DEVICE


@dataclass(frozen=True)
class Table:
    """One table: its columns as (name, SQL type), and its primary key column if any."""

    name: str
    columns: Tuple[Tuple[str, str], ...]
    key: str = ""

    @property
    def create_sql(self) -> str:
        cols = ",".join(f"{n} {t}{' PRIMARY KEY' if n == self.key else ''}" for n, t in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({cols})"

    @property
    def insert_sql(self) -> str:
        return self.insert_with()

    def insert_with(self, **constants: int) -> str:
        """An INSERT whose *constants* columns are literals: rows carry only the other columns, in order
        (fewer values to bind from Python: the writer's hot path)."""
        values = ",".join(str(constants.get(name, "?")) for name, _ in self.columns)
        return f"INSERT INTO {self.name} VALUES ({values})"


def _table(name: str, columns: str, key: str = "") -> Table:
    """``columns``: space-separated names, each INTEGER unless suffixed ``:TEXT``, ``:NUMERIC``, ``:REAL``."""
    pairs = tuple((c.split(":")[0], c.split(":")[1] if ":" in c else "INTEGER") for c in columns.split())
    return Table(name, pairs, key)


def _enum(name: str) -> Table:
    return _table(name, "id name:TEXT", key="id")


STRING_IDS = _table("STRING_IDS", "id value:TEXT")
SESSION_TIME_INFO = _table("SESSION_TIME_INFO", "startTimeNs endTimeNs")
META_DATA = _table("META_DATA", "name:TEXT value:TEXT")
HOST_INFO = _table("HOST_INFO", "hostUid:TEXT hostName:TEXT")
NPU_INFO = _table("NPU_INFO", "id name:TEXT")
RANK_DEVICE_MAP = _table("RANK_DEVICE_MAP", "rankId deviceId")
ENUM_API_TYPE = _enum("ENUM_API_TYPE")
ENUM_MSTX_EVENT_TYPE = _enum("ENUM_MSTX_EVENT_TYPE")
ENUM_HCCL_DATA_TYPE = _enum("ENUM_HCCL_DATA_TYPE")
CANN_API = _table("CANN_API", "startNs endNs type globalTid connectionId name")
TASK = _table(
    "TASK",
    "startNs endNs deviceId connectionId globalTaskId globalPid taskType contextId streamId taskId modelId",
)
COMPUTE_TASK_INFO = _table(
    "COMPUTE_TASK_INFO",
    "name globalTaskId blockNum mixBlockNum taskType opType inputFormats inputDataTypes inputShapes"
    " outputFormats outputDataTypes outputShapes attrInfo opState hf32Eligible",
)
COMMUNICATION_OP = _table(
    "COMMUNICATION_OP",
    "opName startNs endNs connectionId groupName opId relay retry dataType algType count:NUMERIC opType"
    " deviceId",
)
MSTX_EVENTS = _table(
    "MSTX_EVENTS",
    "startNs endNs eventType rangeId category message globalTid endGlobalTid domainId connectionId",
)
MSMONITOR_TABLES = (
    STRING_IDS,
    SESSION_TIME_INFO,
    META_DATA,
    HOST_INFO,
    NPU_INFO,
    RANK_DEVICE_MAP,
    ENUM_API_TYPE,
    ENUM_MSTX_EVENT_TYPE,
    ENUM_HCCL_DATA_TYPE,
    CANN_API,
    TASK,
    COMPUTE_TASK_INFO,
    COMMUNICATION_OP,
    MSTX_EVENTS,
)
# COMPUTE_TASK_INFO's texts that MSPTI's kernel records do not have: N/A for every kernel.
KERNEL_NA_TEXTS = (
    "opType",
    "inputFormats",
    "inputDataTypes",
    "inputShapes",
    "outputFormats",
    "outputDataTypes",
    "outputShapes",
    "attrInfo",
    "opState",
    "hf32Eligible",
)
# The kinds msMonitor does not write, in tables of this project's own (same conventions).
_DEVICE_TIMES = "startNs endNs deviceId streamId"
EXTRA_TABLES: Dict[Kind, Table] = {
    Kind.HCCL: _table("HCCL", f"{_DEVICE_TIMES} name commName bandwidthGbps:REAL"),
    Kind.MEMORY: _table("MEMORY", f"{_DEVICE_TIMES} connectionId name bytes address"),
    Kind.MEMSET: _table("MEMSET", f"{_DEVICE_TIMES} connectionId name bytes isAsync"),
    Kind.MEMCPY: _table("MEMCPY", f"{_DEVICE_TIMES} connectionId name bytes isAsync"),
}
# Ours, beside msMonitor's SCHEMA_VERSION keys: what wrote the file (msMonitor's C++ plugin writes none).
PRODUCER = "msmonitor_plugin"


def calc_hash_id(text: str) -> int:
    """msMonitor's ``CalcHashId``: two 32-bit polynomial hashes over the bytes (C ``char``: signed)."""
    h0 = h1 = 0
    for byte in text.encode("utf-8"):
        c = byte if byte < 0x80 else (byte - 0x100) & 0xFFFFFFFF
        h0 = (h0 * 29 + c) & 0xFFFFFFFF
        h1 = (h1 * 131 + c) & 0xFFFFFFFF
    return (h0 << 32) | h1


def global_tid(pid: int, tid: int) -> int:
    return (pid << 32) | (tid & 0xFFFFFFFF)


def host_uid() -> str:
    """msMonitor's HOST_INFO.hostUid: the hash of the sorted MAC addresses of the non-loopback interfaces
    (the universally administered ones when there are any), "" when there are none."""
    universal: List[str] = []
    local: List[str] = []
    try:
        interfaces = os.listdir("/sys/class/net")
    except OSError:
        return ""
    for name in interfaces:
        try:
            with open(f"/sys/class/net/{name}/flags") as f:
                if int(f.read(), 16) & 0x8:  # IFF_LOOPBACK
                    continue
            with open(f"/sys/class/net/{name}/address") as f:
                mac = f.read().strip().replace(":", "").lower()
        except (OSError, ValueError):
            continue
        if mac:
            (local if int(mac[:2], 16) & 0x2 else universal).append(mac)
    macs = sorted(universal or local)
    return str(calc_hash_id("-".join(macs))) if macs else ""


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
    """One database per monitoring session, in msMonitor's schema (see the module docstring)."""

    ext = "db"

    def __init__(
        self,
        directory: str,
        pid: int,
        rank: int,
        backend: str = "",
        host_is_device: bool = False,
        name: str = "",
    ) -> None:
        """A new file in *directory*, named as msMonitor names it (*name*: an upgraded file keeps its own);
        *host_is_device*: the backend's ``host_is_device``."""
        self.host_is_device = host_is_device
        self.pid = pid
        self.rank = rank
        self.start_ns = time.time_ns()
        name = name or file_name(pid, self.start_ns // 1_000_000, rank, self.ext)
        self.path = os.path.join(directory, name)
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
    return int(name) if name.isdigit() else INVALID_DATA_TYPE  # layouts names an unknown number by itself


def _extra_row(r: Record, intern: Callable[[str], int]) -> tuple:
    x = r.extras
    head = (r.start_ns, r.end_ns, r.device, r.stream)
    if isinstance(x, HcclExtras):
        return (*head, intern(r.name), intern(x.comm_name), x.bandwidth_gbps)
    memory = x if isinstance(x, MemoryExtras) else MemoryExtras(0)
    last = memory.address if r.kind == Kind.MEMORY else int(memory.is_async)
    return (*head, r.correlation_id, intern(r.name), memory.bytes, last)
