"""The daemon's own model of what became of a command: each process's outcome, the answer, msMonitor's
status. What a command asks is its kind's request, the model its declaration makes
(:mod:`msmonitor_contract.kinds`), and its targets are :data:`msmonitor_contract.targets.Targets`.

Every wire converts to and from these types at its edge (gRPC in :mod:`dynolog.edge.rpc.convert`); the
pipeline, the kinds' policies, the stores and incidents see nothing else.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import List, Optional

from msmonitor_contract.vocabulary import Reason

from .registry import ProcessRecord
from .traces import TraceSlot


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
