"""A daemon's answer to a command: whether any process took it, and each matched process's outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from msmonitor_contract.vocabulary import CommandStatus, Reason


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
