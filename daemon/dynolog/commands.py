"""One pipeline for every command kind: targeting → exclusion → capability → the kind's own rule →
process limit → ``commandStatus`` with its reason; then the kind's policy delivers it.

Exclusion comes first: "npu-monitor is running there" is true and actionable whichever client would
have taken the command.

A kind is a :class:`Policy` (``kinds/``): its config text, its own per-process rule, what it expects a
process to write, and how it is delivered. The rest — who is targeted, who can run it, what excludes
what, how many may take it, and how the answer is worded — is written here once.
"""

from __future__ import annotations

import abc
import collections
from dataclasses import dataclass, field
from typing import Generic, List, Optional, Protocol, TypeVar

from dynoproto import dynolog_pb2 as pb
from msmonitor_plugin.vocabulary import CommandKind, MonitorState, Reason, TraceState

from . import targeting
from .registry import ProcessRecord, Registry
from .traces import TraceStore


class Targeted(Protocol):
    """Every command request says which processes it is for."""

    @property
    def targets(self) -> pb.Targets: ...


Request = TypeVar("Request", bound=Targeted)


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


class Policy(abc.ABC, Generic[Request]):
    """What is particular to one command kind."""

    kind: CommandKind
    exclusive = True  # the exclusion rules apply (attaching to a process runs nothing there yet)

    @abc.abstractmethod
    def label(self, request: Request) -> str: ...

    def refuse(self, request: Request, record: ProcessRecord) -> Optional[Reason]:
        """The kind's own rule for one process, after capability and exclusion; None: it may take it."""
        return None

    def explain(self, reason: Reason, record: ProcessRecord) -> str:
        """Why *record* did not take it, in words: the reason's own, unless the kind knows more."""
        return reason.value

    @abc.abstractmethod
    async def deliver(self, request: Request, result: CommandResult) -> None:
        """Send the command to the processes that take it, and complete their outcomes."""


class CommandPipeline:
    def __init__(self, registry: Registry, traces: TraceStore) -> None:
        self.registry = registry
        self._traces = traces

    async def run(self, policy: Policy[Request], request: Request) -> CommandResult:
        result = self.decide(policy, request)
        if result.effective:
            await policy.deliver(request, result)
        result.conclude()
        return result

    def decide(self, policy: Policy[Request], request: Request) -> CommandResult:
        result = CommandResult(policy.label(request))
        targets = request.targets
        if len(self.registry) == 0:
            return _refused(result, Reason.NO_PROCESS_REGISTERED, Reason.NO_PROCESS_REGISTERED.value)
        matched = targeting.select(self.registry, targets)
        if not matched:
            return _refused(
                result,
                Reason.NO_PROCESS_MATCHED,
                f"none of the {len(self.registry)} registered processes matches "
                f"{targeting.describe(targets)}; see `dyno processes`",
            )
        for record in matched:
            outcome = Outcome(record)
            reason = (
                (self.exclusion(policy.kind, record) if policy.exclusive else None)
                or (None if record.can_run(policy.kind) else Reason.NOT_SUPPORTED)
                or policy.refuse(request, record)
            )
            if reason is None and targets.process_limit and len(result.taken) >= targets.process_limit:
                reason = Reason.PROCESS_LIMIT
            if reason is not None:
                outcome.refuse(reason, policy.explain(reason, record))
            result.outcomes.append(outcome)
        return result

    def exclusion(self, kind: CommandKind, record: ProcessRecord) -> Optional[Reason]:
        """nputrace and npu-monitor exclude each other per process; one trace at a time; one command
        waiting for a polling client at a time."""
        if kind.traces:
            if record.monitor_state is MonitorState.RUNNING:
                return Reason.NPU_MONITOR_RUNNING
            if self._traces.active(record.host_pid) is not None or record.trace_state.busy:
                return Reason.TRACE_BUSY
        elif record.trace_state is TraceState.RUNNING or (
            # msMonitor lets a monitor start while a trace waits for its step; but where the plugin runs
            # both, the monitor's profiler would keep the trace's from starting.
            record.trace_state is TraceState.READY
            and record.can_run(CommandKind.NPUTRACE)
            and record.accepts_push
        ):
            return Reason.NPU_TRACE_RUNNING
        if record.outbox is not None:
            return Reason.TRACE_BUSY
        return None


def _refused(result: CommandResult, reason: Reason, message: str) -> CommandResult:
    result.refusal, result.message = reason, message
    return result
