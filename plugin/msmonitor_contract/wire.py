"""Byte layout of the local IPC between processes and the dynolog daemon.

This module is the single definition of the wire: the plugin speaks it and the daemon imports it.

Every message is one ``AF_UNIX SOCK_DGRAM`` datagram: a 40-byte header ``{u64 size; char type[32]}``
followed by ``size`` payload bytes. The header and the compatibility payloads (``req``, ``ctxt``,
``npuTraceStatus``/``npuMonitorStatus``) use the native layout of dynolog's ipcfabric, so stock Kineto
and msMonitor's C++ plugin interoperate byte for byte. This project's own messages carry JSON payloads
under types starting with ``mm.`` (which no dynolog prefix match can mistake for ``req`` or ``ctxt``).

Decoding never trusts the peer: lengths, counts and sizes are checked and anything inconsistent raises
:class:`WireError`.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Collection, Dict, List, Optional, Tuple, Type, TypeVar, Union

HEADER = struct.Struct("=Q32s")
HEADER_SIZE = HEADER.size  # 40
TYPE_SIZE = 32
# Far above any legitimate message (a registration is ~500 bytes) and below the kernel's default
# datagram limit; a receiver reads with this buffer and treats truncation as malformed.
MAX_DATAGRAM = 64 * 1024
# Kineto sends at most 11 pids (self + 10 ancestors); room for deeper launchers, not for abuse.
MAX_PIDS = 64

# Endpoint names. Abstract names carry a leading and a trailing NUL, exactly as ipcfabric builds them.
DAEMON_ENDPOINT = "dynolog"
# msMonitor's daemon listens on pathnames in its user's home instead: control, and metric data.
MSMONITOR_CONTROL_SOCKET = "dynolog.sock"
MSMONITOR_DATA_SOCKET = "dynolog_data.sock"

# Message types: dynolog / Kineto / msMonitor compatibility.
REQ = "req"
CTXT = "ctxt"
NPU_TRACE_STATUS = "npuTraceStatus"
NPU_MONITOR_STATUS = "npuMonitorStatus"
DATA = "data"
# Message types of this project (JSON payloads).
HELLO = "mm.hello"  # plugin -> daemon: registration, repeated as the heartbeat
ACK = "mm.ack"  # daemon -> plugin: registration accepted, with the daemon's keep-alive
BYE = "mm.bye"  # plugin -> daemon: the process is leaving
COMMAND = "mm.command"  # daemon -> plugin: run a trace (or monitor) command
EVENT = "mm.event"  # plugin -> daemon: a trace changed phase (accepted, running, finished, failed)
MONITOR = "mm.monitor"  # plugin -> daemon: the npu-monitor state after a command, or when it stopped
METRICS = "mm.metrics"  # plugin -> daemon: one chunk of an interval's monitor report (JSON)
STEP = "mm.step"  # plugin -> daemon: the step count, between heartbeats (to a daemon whose ack asks it)

# Kineto's request type bit (LibkinetoConfigType) that says its activity profiler is free.
CONFIG_ACTIVITIES = 2

Address = Union[bytes, str]


class WireError(ValueError):
    """A datagram or payload that does not parse; the receiver counts and drops it."""


# Kernel-verified sender credentials (SO_PASSCRED): struct ucred {pid_t pid; uid_t uid; gid_t gid;}.
_UCRED = struct.Struct("=iII")
CREDENTIALS_SPACE = socket.CMSG_SPACE(_UCRED.size)


def credentials(ancdata: List[Tuple[int, int, bytes]]) -> Optional[Tuple[int, int]]:
    """(pid, uid) of a datagram's sender from ``recvmsg``'s ancillary data; None when absent."""
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _UCRED.size:
            pid, uid, _gid = _UCRED.unpack_from(payload)
            return pid, uid
    return None


def receive_from(
    sock: socket.socket, expected: Address, uids: Optional[Collection[int]] = None
) -> Optional[bytes]:
    """One datagram from *expected*, sent by one of *uids* (this user or root by default); anything else
    is dropped (None).

    Abstract names have no permissions, so a process's own socket is reachable by every local user:
    only the daemon it talks to may command it. Raises BlockingIOError when nothing is queued.
    The socket needs ``SO_PASSCRED`` set.
    """
    data, ancdata, flags, sender = sock.recvmsg(MAX_DATAGRAM, CREDENTIALS_SPACE)
    creds = credentials(ancdata)
    if creds is None or creds[1] not in (uids or (os.getuid(), 0)) or flags & socket.MSG_TRUNC:
        return None
    if not sender or _normal(sender) != _normal(expected):  # an unbound sender has no address (None)
        return None
    return data


def _normal(address: Address) -> bytes:
    return address if isinstance(address, bytes) else os.fsencode(address)


def endpoint_address(name: str, socket_dir: str = "") -> Address:
    """The socket address of endpoint *name*: abstract by default, a pathname under *socket_dir*."""
    if socket_dir:
        return f"{socket_dir.rstrip('/')}/{name}"
    return b"\0" + name.encode() + b"\0"


def describe_address(address: Address) -> str:
    """Human form of an address, as ``ss -x`` prints it (``@name@`` for abstract names)."""
    if isinstance(address, bytes):
        return address.decode(errors="replace").replace("\0", "@")
    return address


@dataclass(frozen=True)
class Datagram:
    type: str
    payload: bytes


def encode(msg_type: str, payload: bytes = b"") -> bytes:
    raw_type = msg_type.encode("ascii")
    if len(raw_type) >= TYPE_SIZE:
        raise WireError(f"message type {msg_type!r} is longer than {TYPE_SIZE - 1} bytes")
    return HEADER.pack(len(payload), raw_type) + payload


def decode(data: bytes) -> Datagram:
    if len(data) < HEADER_SIZE:
        raise WireError(f"datagram of {len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
    size, raw_type = HEADER.unpack_from(data)
    if size != len(data) - HEADER_SIZE:
        raise WireError(f"header says {size} payload bytes, datagram carries {len(data) - HEADER_SIZE}")
    end = raw_type.find(b"\0")
    if end <= 0:
        raise WireError("message type is empty or not NUL-terminated")
    try:
        msg_type = raw_type[:end].decode("ascii")
    except UnicodeDecodeError:
        raise WireError("message type is not ASCII") from None
    return Datagram(msg_type, bytes(data[HEADER_SIZE:]))


# --- compatibility payloads (native layout, as ipcfabric/Utils.h) ---------------------------------

_REQ_HEAD = struct.Struct("=iiq")
_CTXT = struct.Struct("=iiq")
_NPU_STATUS = struct.Struct("=iiiii4xq")


@dataclass(frozen=True)
class KinetoRequest:
    """``req``: a poll for a staged config. ``pids`` is the leaf pid first, then its ancestors."""

    config_type: int
    job_id: int
    pids: Tuple[int, ...]

    def pack(self) -> bytes:
        return _REQ_HEAD.pack(self.config_type, len(self.pids), self.job_id) + struct.pack(
            f"={len(self.pids)}i", *self.pids
        )

    @classmethod
    def unpack(cls, payload: bytes) -> KinetoRequest:
        if len(payload) < _REQ_HEAD.size:
            raise WireError(f"req payload of {len(payload)} bytes is shorter than {_REQ_HEAD.size}")
        config_type, count, job_id = _REQ_HEAD.unpack_from(payload)
        if not 1 <= count <= MAX_PIDS:
            raise WireError(f"req pid count {count} is outside 1..{MAX_PIDS}")
        if len(payload) != _REQ_HEAD.size + 4 * count:
            raise WireError(
                f"req says {count} pids but carries {len(payload) - _REQ_HEAD.size} bytes of them"
            )
        pids = struct.unpack_from(f"={count}i", payload, _REQ_HEAD.size)
        return cls(config_type, job_id, tuple(pids))


@dataclass(frozen=True)
class KinetoContext:
    """``ctxt``: registration of one process on one device (sent by msMonitor's plugin, not by torch)."""

    device: int
    pid: int
    job_id: int

    def pack(self) -> bytes:
        return _CTXT.pack(self.device, self.pid, self.job_id)

    @classmethod
    def unpack(cls, payload: bytes) -> KinetoContext:
        if len(payload) != _CTXT.size:
            raise WireError(f"ctxt payload must be {_CTXT.size} bytes, got {len(payload)}")
        return cls(*_CTXT.unpack(payload))


def pack_context_reply(count: int) -> bytes:
    return struct.pack("=i", count)


@dataclass(frozen=True)
class NpuStatus:
    """``npuTraceStatus`` / ``npuMonitorStatus``: msMonitor's 32-byte status struct."""

    status: int
    current_step: int
    start_step: int
    stop_step: int
    pid: int
    job_id: int

    def pack(self) -> bytes:
        return _NPU_STATUS.pack(
            self.status, self.current_step, self.start_step, self.stop_step, self.pid, self.job_id
        )

    @classmethod
    def unpack(cls, payload: bytes) -> NpuStatus:
        if len(payload) != _NPU_STATUS.size:
            raise WireError(f"status payload must be {_NPU_STATUS.size} bytes, got {len(payload)}")
        return cls(*_NPU_STATUS.unpack(payload))


# --- this project's JSON payloads ---------------------------------------------------------------

_J = TypeVar("_J", bound="JsonMessage")
_SCALARS: Dict[str, Tuple[type, ...]] = {"int": (int,), "str": (str,), "float": (int, float), "bool": (bool,)}


class JsonMessage:
    """A dataclass carried as a JSON object; unknown keys are ignored so newer peers stay compatible."""

    def to_payload(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()  # type: ignore[call-overload]

    @classmethod
    def from_payload(cls: Type[_J], payload: bytes) -> _J:
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError) as exc:
            raise WireError(f"{cls.__name__} payload is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise WireError(f"{cls.__name__} payload is not a JSON object")
        values: Dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name in obj:
                values[f.name] = _checked(cls.__name__, f.name, str(f.type), obj[f.name])
        try:
            return cls(**values)
        except TypeError as exc:  # a required field is missing
            raise WireError(f"{cls.__name__}: {exc}") from None


# Integers must fit the gRPC fields they end up in: int32, but for these int64 ones.
_INT64_FIELDS = {"job_id", "step", "current_step", "start_step", "stop_step", "size_bytes"}


def _fits(name: str, value: Any) -> bool:
    if not isinstance(value, int):
        return True
    bits = 63 if name in _INT64_FIELDS else 31
    return -(2**bits) <= value < 2**bits


def _checked(message: str, name: str, annotation: str, value: Any) -> Any:
    """Check one JSON value against its (string) annotation; bool is not accepted as an int."""
    if annotation in _SCALARS:
        ok = isinstance(value, _SCALARS[annotation]) and (annotation == "bool" or not isinstance(value, bool))
        ok = ok and _fits(name, value)
    elif annotation.startswith("List["):
        inner = annotation[5:-1]
        ok = isinstance(value, list) and all(
            isinstance(v, _SCALARS[inner]) and not isinstance(v, bool) and _fits(name, v) for v in value
        )
    elif annotation.startswith("Dict[str, str]"):
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
    else:  # pragma: no cover - a programming error in this module
        raise TypeError(f"unsupported annotation {annotation}")
    if not ok:
        raise WireError(f"{message}.{name} has the wrong type: {value!r:.60}")
    return value


@dataclass
class Hello(JsonMessage):
    """Registration of a plugin process; sent at start and repeated as the heartbeat."""

    pid: int
    # Sent for older daemons; this one reads the pid and the ancestors from /proc, and never selects a
    # process by what it claims here.
    ancestors: List[int] = field(default_factory=list)
    job_id: int = 0
    rank: int = -1
    local_rank: int = -1
    world_size: int = -1
    devices: List[int] = field(default_factory=list)
    backend: str = "python"
    versions: Dict[str, str] = field(default_factory=dict)
    plugin_version: str = ""
    capabilities: List[str] = field(default_factory=list)
    hostname: str = ""
    step: int = 0
    # The trace this process holds, so a restarted daemon knows it is busy: id and phase
    # ("" when idle, else TracePhase.READY or RUNNING).
    trace_id: str = ""
    trace_phase: str = ""
    monitor_state: str = ""  # a MonitorState value ("" from clients that run no monitor)
    service: str = ""  # the service profiler's switch: "" (none), "off", or "on since ..., <folder>"
    # Who holds the process's one profiler slot (slot.py): "" when it is free, else the holder's name —
    # "nputrace <id>" or "gputrace <id>" (from ready to finished), "a dyno dynamic window", "npu-monitor",
    # "the service profiler's operator collection (acl_task_time <mode>)".
    profiler: str = ""


@dataclass
class Ack(JsonMessage):
    """The daemon's answer to :class:`Hello`: how often it expects to hear from the process."""

    keepalive_s: float
    daemon_version: str = ""
    # The daemon's --trace-root directories: the plugin confines the folders it writes traces into to
    # them again when it writes (trace/output.py), since a path checked on arrival can change by then.
    trace_roots: List[str] = field(default_factory=list)
    # The daemon takes :class:`Step` between heartbeats (an older one would count it as malformed).
    step_reports: bool = False


@dataclass
class Bye(JsonMessage):
    pid: int


@dataclass
class Step(JsonMessage):
    """The process's step count, sent when it changed, at most every ``link.STEP_REPORT_S``."""

    step: int


@dataclass
class Command(JsonMessage):
    """A command for the process: a :class:`~.vocabulary.CommandKind` value, the id the process answers
    with (a trace id, or the npu-monitor command's id) and its config text (:mod:`.configtext`)."""

    kind: str
    trace_id: str
    config: str


@dataclass
class TraceEvent(JsonMessage):
    """A trace's phase change in one process; ``stop_step`` is exclusive."""

    trace_id: str
    phase: str  # a TracePhase value
    current_step: int = 0
    start_step: int = -1
    stop_step: int = -1
    output: str = ""
    files: List[str] = field(default_factory=list)
    error: str = ""
    warnings: List[str] = field(default_factory=list)
    size_bytes: int = 0  # of the files written


@dataclass
class MonitorEvent(JsonMessage):
    """The monitor's state after an npu-monitor command (``command_id``), or after it stopped by itself."""

    command_id: str
    state: str  # a MonitorState value
    backend: str = ""
    reason: str = ""  # why it stopped on its own: "duration"
    unavailable: Dict[str, str] = field(default_factory=dict)  # kind -> why this backend cannot record it
    warnings: List[str] = field(default_factory=list)
    output: str = ""
    error: str = ""
