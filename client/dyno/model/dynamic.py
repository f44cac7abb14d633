"""A ``dyno dynamic`` session's requests and replies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from msmonitor_contract.vocabulary import DynamicAction, SessionNews

from .traces import TraceProcess


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
