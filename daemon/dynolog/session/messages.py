"""What a ``dyno dynamic`` session is asked (:class:`SessionStep`) and what it answers
(:class:`SessionReply`): a list of parts, each what happened (the vocabulary's ``SessionNews``) with its
facts and a copy of the window as it was then; ``dyno`` words them (``dyno/session/lines.py``)."""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field
from typing import Any, List, Optional

from msmonitor_contract.vocabulary import SessionNews, TracePhase

from ..core.registry import ProcessRecord
from ..core.traces import ProcessTrace
from ..kinds.dynamic import AttachCommand


class SessionAction(enum.Enum):
    """What a ``dyno dynamic`` client asks of its session (NONE: news it did not ask for)."""

    NONE = 0
    ATTACH = 1
    START = 2
    STOP = 3
    STATUS = 4
    QUIT = 5  # stop collecting if collecting, then end the session


@dataclass(frozen=True)
class SessionStep:
    """One request on a session's stream."""

    seq: int
    action: SessionAction
    attach: Optional[AttachCommand] = None  # with ATTACH


@dataclass
class SessionProcess:
    """One process's part in a session's answer, as it was at that moment."""

    pid: int
    host_pid: int
    rank: int
    ok: bool
    detail: str
    window: Optional[ProcessTrace] = None  # a copy of its window's state, when there is one
    step: int = 0  # the step the daemon last heard of
    backend: str = ""
    new_warnings: List[str] = field(default_factory=list)  # not already given when the window started
    collecting_s: float = 0.0

    @classmethod
    def of_record(cls, record: ProcessRecord, ok: bool, detail: str) -> SessionProcess:
        return cls(
            record.pid,
            record.host_pid,
            record.rank,
            ok,
            detail,
            step=record.current_step,
            backend=record.backend,
        )

    @classmethod
    def of_window(cls, p: ProcessTrace, **facts: Any) -> SessionProcess:
        ok = p.phase is not TracePhase.FAILED
        return cls(p.pid, p.host_pid, p.rank, ok, p.error or p.phase.value, copy.deepcopy(p), **facts)


@dataclass
class SessionPart:
    """One thing an answer says, with the facts ``dyno`` words it from."""

    news: SessionNews
    processes: List[SessionProcess] = field(default_factory=list)
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


@dataclass
class SessionReply:
    seq: int  # of the request answered; 0: news nobody asked for
    action: SessionAction
    ok: bool  # at least one process did what was asked
    parts: List[SessionPart]
    processes: List[SessionProcess] = field(default_factory=list)
    window_id: str = ""
    ended: bool = False  # the session is over; the parts say why
    commands_left: int = 0
