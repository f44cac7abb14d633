"""The daemon's own command model: which processes a command is for, what each kind asks, and what
became of it.

Every wire converts to and from these types at its edge (gRPC in :mod:`dynolog.rpc.convert`); the
pipeline, the kinds' policies, the stores and incidents see nothing else. Plain dataclasses: a new edge
builds them without fabricating another wire's messages, and incidents persist them as JSON.
"""

from __future__ import annotations

import collections
import dataclasses
import typing
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Dict, FrozenSet, List, Optional, Tuple, Type, TypeVar

from msmonitor_contract.vocabulary import Reason

from .registry import ProcessRecord
from .traces import TraceSlot


@dataclass(frozen=True)
class Targets:
    """Which processes a command is for; empty fields select every process."""

    job_id: int = 0
    pids: Tuple[int, ...] = ()  # a process matches when it, or one of its ancestors, is listed
    ranks: Tuple[int, ...] = ()
    process_limit: int = 0  # 0: no limit

    @cached_property
    def pid_set(self) -> FrozenSet[int]:
        """Built once per command, not once per process matched."""
        return frozenset(self.pids)

    @cached_property
    def rank_set(self) -> FrozenSet[int]:
        return frozenset(self.ranks)

    @classmethod
    def of_pid(cls, host_pid: int) -> Targets:
        return cls(pids=(host_pid,))


_Model = TypeVar("_Model")


def from_fields(cls: Type[_Model], values: Dict[str, Any]) -> _Model:
    """*cls* from a mapping of its fields (JSON, or what an edge read off its wire): lists become
    tuples, nested models are built the same way, and absent fields keep their defaults."""
    hints = typing.get_type_hints(cls)
    kwargs: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if values.get(f.name) is None:
            continue
        value, nested = values[f.name], _model_in(hints[f.name])
        if nested is not None:
            value = from_fields(nested, value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def _model_in(hint: Any) -> Optional[type]:
    """The dataclass a field holds (also as ``Optional[...]``), or None."""
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
            return candidate
    return None


@dataclass
class Outcome:
    """What one matched process does with the command."""

    record: ProcessRecord
    reason: Optional[Reason] = None  # None: it took the command
    detail: str = ""  # why not (the reason's wording, or the process's own answer), or how it went
    expected_output: str = ""

    @property
    def triggered(self) -> bool:
        return self.reason is None

    def refuse(self, reason: Reason, detail: str = "") -> None:
        self.reason, self.detail = reason, detail or reason.value


@dataclass
class CommandResult:
    label: str  # "nputrace", "npu-monitor start", ... as the answer names the command
    outcomes: List[Outcome] = field(default_factory=list)
    refusal: Optional[Reason] = None  # refused before any process: none registered, none matched
    message: str = ""
    trace_id: str = ""

    @property
    def taken(self) -> List[Outcome]:
        return [o for o in self.outcomes if o.triggered]

    @property
    def effective(self) -> bool:
        return bool(self.taken)

    @property
    def reason(self) -> Optional[Reason]:
        """The refusal, or the most common reason among the processes when none took it."""
        if self.refusal is not None or self.effective:
            return self.refusal
        return collections.Counter(o.reason for o in self.outcomes).most_common(1)[0][0]

    def conclude(self) -> None:
        """Word the answer once every process's outcome is known."""
        if self.refusal is not None:
            return
        if self.effective:
            named = f"{self.label} {self.trace_id}" if self.trace_id else self.label
            self.message = f"{named} sent to {len(self.taken)} of {len(self.outcomes)} matched processes"
            return
        self.trace_id = ""
        why = next(o.detail for o in self.outcomes if o.reason is self.reason)
        self.message = f"no matched process can take {self.label}: {why}"


@dataclass(frozen=True)
class MsMonitorStatus:
    """msMonitor's getStatus over this node's processes (msMonitor had one global slot): a state is
    Running if any process runs it, else Ready, else Idle, else Uninitialized."""

    nputrace: str
    npumonitor: str
    current_step: int
    start_step: int  # of the trace that is Running or Ready; -1 otherwise
    stop_step: int

    @classmethod
    def of(cls, records: List[ProcessRecord], slots: List[TraceSlot]) -> MsMonitorStatus:
        tracing = [slot for slot in slots if slot.state.busy]
        start, stop = (tracing[0].start_step, tracing[0].stop_step) if tracing else (-1, -1)
        return cls(
            nputrace=_summary([slot.state.value for slot in slots]),
            npumonitor=_summary([r.monitor_state.value for r in records]),
            current_step=max((r.current_step for r in records), default=0),
            start_step=start,
            stop_step=stop,
        )


def _summary(states: List[str]) -> str:
    return next((s for s in ("running", "ready", "idle") if s in states), "uninitialized").title()
