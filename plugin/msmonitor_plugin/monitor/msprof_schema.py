"""msMonitor's npu-monitor database schema (msprof's SQLite tables), as this plugin writes and reads it.

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
from dataclasses import dataclass
from typing import Dict, List, Tuple

from msmonitor_contract.activity import Kind

from .layouts import DATA_TYPES

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
