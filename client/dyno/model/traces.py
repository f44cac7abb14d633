"""A trace as the daemon follows it in each process, the recent traces, and a trace's files in chunks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from msmonitor_contract.vocabulary import TracePhase


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
