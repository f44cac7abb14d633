"""What a daemon says of itself and of its processes (``dyno status``, ``version``, ``processes``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from msmonitor_contract.vocabulary import ClientKind, MonitorState, TraceState


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
