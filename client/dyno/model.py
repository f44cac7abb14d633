"""What ``dyno`` knows of a daemon's answers: its own frozen dataclasses, each the proto message of the
same name field by field (tests/test_client_model.py holds them to dynolog.proto). The gRPC edge
(:mod:`dyno.edge.rpc`) converts the messages into these by field name, and the legacy edge builds them
from a C++ daemon's JSON; commands, fan-out, output, ``respond`` and ``collect`` see nothing else.

A repeated field is a tuple, a map a dict, a message field with presence Optional (None: absent), and an
enum the vocabulary's member of the same name (None: the proto's ``*_UNSPECIFIED``). What a command
sends is its kind's request, the model its declaration makes (:mod:`msmonitor_contract.kinds`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from msmonitor_contract.vocabulary import (
    ClientKind,
    CommandStatus,
    DynamicAction,
    MonitorState,
    Reason,
    SessionNews,
    TracePhase,
    TraceState,
)

# --- the daemon ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IpcCounters:
    received: int = 0
    replied: int = 0
    malformed: int = 0
    rejected_senders: int = 0
    send_errors: int = 0
    handled: int = 0


@dataclass(frozen=True)
class MsMonitorStatus:
    nputrace: str = ""
    npumonitor: str = ""
    current_step: int = 0
    start_step: int = 0
    stop_step: int = 0


@dataclass(frozen=True)
class GetStatusResponse:
    hostname: str = ""
    version: str = ""
    pid: int = 0
    uptime_s: float = 0.0
    ipc_enabled: bool = False
    ipc_addresses: Tuple[str, ...] = ()
    processes: int = 0
    plugin_processes: int = 0
    kineto_processes: int = 0
    ipc: Optional[IpcCounters] = None
    tls: bool = False
    msmonitor: Optional[MsMonitorStatus] = None
    dropped: Dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LegacyStatus:
    """What ``dyno status`` shows of a C++ daemon: which one, its version, its getStatus as it is."""

    flavor: str
    version: str
    tls: bool
    reply: Dict[str, Any]

    def get(self, key: str) -> str:
        return str(self.reply.get(key, "-"))


@dataclass(frozen=True)
class GetVersionResponse:
    version: str = ""
    api: str = ""
    python: str = ""


@dataclass(frozen=True)
class ProcessInfo:
    pid: int = 0
    host_pid: int = 0
    ancestors: Tuple[int, ...] = ()
    job_id: int = 0
    rank: int = 0
    local_rank: int = 0
    world_size: int = 0
    devices: Tuple[int, ...] = ()
    backend: str = ""
    clients: Tuple[ClientKind, ...] = ()
    hostname: str = ""
    versions: Dict[str, str] = field(default_factory=dict)
    plugin_version: str = ""
    capabilities: Tuple[str, ...] = ()
    registered_at: float = 0.0
    last_seen_s: float = 0.0
    uid: int = 0
    current_step: int = 0
    trace_state: TraceState = TraceState.UNINITIALIZED
    monitor_state: MonitorState = MonitorState.UNINITIALIZED
    held_by: str = ""
    service: str = ""
    helper_pids: Tuple[int, ...] = ()


# --- commands -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessOutcome:
    pid: int = 0
    host_pid: int = 0
    rank: int = 0
    triggered: bool = False
    reason: Optional[Reason] = None
    detail: str = ""
    expected_output: str = ""


@dataclass(frozen=True)
class CommandResponse:
    command_status: Optional[CommandStatus] = None
    reason: Optional[Reason] = None
    message: str = ""
    trace_id: str = ""
    processes: Tuple[ProcessOutcome, ...] = ()
    processes_matched: Tuple[int, ...] = ()
    activity_profilers_triggered: Tuple[int, ...] = ()
    activity_profilers_busy: int = 0
    event_profilers_triggered: Tuple[int, ...] = ()
    event_profilers_busy: int = 0

    @property
    def effective(self) -> bool:
        return self.command_status is CommandStatus.EFFECTIVE


# --- traces ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseChange:
    phase: Optional[TracePhase] = None
    at: float = 0.0


@dataclass(frozen=True)
class TraceProcess:
    pid: int = 0
    host_pid: int = 0
    rank: int = 0
    phase: Optional[TracePhase] = None
    start_step: int = 0
    stop_step: int = 0
    current_step: int = 0
    output: str = ""
    files: Tuple[str, ...] = ()
    error: str = ""
    warnings: Tuple[str, ...] = ()
    updated_at: float = 0.0
    history: Tuple[PhaseChange, ...] = ()


@dataclass(frozen=True)
class TraceInfo:
    trace_id: str = ""
    kind: str = ""
    created_at: float = 0.0
    processes: Tuple[TraceProcess, ...] = ()
    done: bool = False


@dataclass(frozen=True)
class PhaseCount:
    phase: Optional[TracePhase] = None
    processes: int = 0


@dataclass(frozen=True)
class TraceSummary:
    trace_id: str = ""
    kind: str = ""
    created_at: float = 0.0
    done: bool = False
    phases: Tuple[PhaseCount, ...] = ()
    folders: Tuple[str, ...] = ()
    files: int = 0
    size_bytes: int = 0


@dataclass(frozen=True)
class FileChunk:
    host: str = ""
    pid: int = 0
    host_pid: int = 0
    rank: int = 0
    name: str = ""
    path: str = ""
    trace: bool = False
    size: int = 0
    offset: int = 0
    data: bytes = b""
    error: str = ""


# --- monitoring -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NameStats:
    name: str = ""
    domain: str = ""
    count: int = 0
    total_ns: int = 0
    mean_ns: float = 0.0


@dataclass(frozen=True)
class KindStats:
    kind: str = ""
    device: int = 0
    count: int = 0
    total_ns: int = 0
    min_ns: int = 0
    max_ns: int = 0
    mean_ns: float = 0.0
    distinct: int = 0
    top: Tuple[NameStats, ...] = ()
    other: Optional[NameStats] = None


@dataclass(frozen=True)
class MetricsReport:
    hostname: str = ""
    pid: int = 0
    host_pid: int = 0
    rank: int = 0
    job_id: int = 0
    seq: int = 0
    backend: str = ""
    start_ns: int = 0
    end_ns: int = 0
    sampled_ns: int = 0
    kinds: Tuple[KindStats, ...] = ()
    dropped: Dict[str, int] = field(default_factory=dict)
    unavailable: Dict[str, str] = field(default_factory=dict)
    final: bool = False


@dataclass(frozen=True)
class NameFigure:
    name: str = ""
    baseline_ns: float = 0.0
    current_ns: float = 0.0


@dataclass(frozen=True)
class IncidentEvent:
    at: float = 0.0
    what: str = ""


@dataclass(frozen=True)
class IncidentInfo:
    id: int = 0
    at: float = 0.0
    hostname: str = ""
    job_id: int = 0
    rank: int = 0
    pid: int = 0
    host_pid: int = 0
    kind: str = ""
    device: int = 0
    name: str = ""
    detection: str = ""
    baseline_ns: float = 0.0
    current_ns: float = 0.0
    intervals: int = 0
    report_seq: int = 0
    traced: bool = False
    action: str = ""
    trace_id: str = ""
    trace_files: Tuple[str, ...] = ()
    figures: Tuple[NameFigure, ...] = ()
    timeline: Tuple[IncidentEvent, ...] = ()


# --- `dyno dynamic` -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DynamicRequest:
    seq: int = 0
    action: Optional[DynamicAction] = None
    attach: Any = None  # with ATTACH: the kind's request (msmonitor_contract.kinds.DYNAMIC's model)


@dataclass(frozen=True)
class DynamicProcess:
    pid: int = 0
    host_pid: int = 0
    rank: int = 0
    ok: bool = False
    detail: str = ""
    window: Optional[TraceProcess] = None
    size_bytes: int = 0
    step: int = 0
    backend: str = ""
    new_warnings: Tuple[str, ...] = ()
    collecting_s: float = 0.0


@dataclass(frozen=True)
class SessionPart:
    news: Optional[SessionNews] = None
    processes: Tuple[DynamicProcess, ...] = ()
    label: str = ""
    refusal: str = ""
    why: str = ""
    window_id: str = ""
    output: str = ""
    hostname: str = ""
    attached: int = 0
    commands_used: int = 0
    command_limit: int = 0
    windows: int = 0
    idle_left_s: float = 0.0
    idle_timeout_s: float = 0.0
    waited_s: float = 0.0


@dataclass(frozen=True)
class DynamicReply:
    seq: int = 0
    action: Optional[DynamicAction] = None
    ok: bool = False
    message: str = ""
    processes: Tuple[DynamicProcess, ...] = ()
    window_id: str = ""
    ended: bool = False
    commands_left: int = 0
    parts: Tuple[SessionPart, ...] = ()
