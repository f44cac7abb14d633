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
from typing import Any, ClassVar, Generic, Optional, Protocol, TypeVar

from msmonitor_contract.schema import Kind
from msmonitor_contract.targets import Targets
from msmonitor_contract.vocabulary import (
    MONITOR_HOLDER,
    CommandKind,
    MonitorState,
    Reason,
    TraceState,
)

from . import targeting
from .delivery import Delivery
from .model import CommandResult, Outcome
from .registry import ClientKind, ProcessRecord, Registry
from .traces import TraceStore


class Targeted(Protocol):
    """Every command says which processes it is for."""

    @property
    def targets(self) -> Targets: ...


Request = TypeVar("Request", bound=Targeted)


class Policy(abc.ABC, Generic[Request]):
    """What is particular to one command kind."""

    kind: CommandKind
    exclusive = True  # the exclusion rules apply (attaching to a process runs nothing there yet)
    traces: ClassVar[bool] = False  # it records a trace: one per process, not beside a monitor
    # The client that takes this kind by polling, where no plugin runs it (msMonitor's, stock Kineto).
    pulled_by: ClassVar[Optional[ClientKind]] = None
    # A kind dyno sends with an RPC of its own names its declaration: its request's model, checks, config
    # text and the RPC (Kind.rpc) the gRPC edge serves it by.
    declaration: ClassVar[Optional[Kind]] = None
    rpc: ClassVar[str] = ""  # the declaration's, for a kind that has one

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.declaration is not None:
            cls.rpc = cls.declaration.rpc

    @classmethod
    def for_node(cls, traces: TraceStore, delivery: Delivery) -> Policy[Any]:
        """The policy as a node builds it (what its constructor takes)."""
        return cls(traces, delivery)  # type: ignore[call-arg]

    @abc.abstractmethod
    def label(self, request: Request) -> str: ...

    def pauses_monitor(self, request: Request) -> bool:
        """The request asks that a running npu-monitor pause for it (``nputrace --pause-monitor``)."""
        return False

    def refuse(self, request: Request, record: ProcessRecord) -> Optional[Reason]:
        """The kind's own rule for one process, after capability and exclusion; None: it may take it."""
        return None

    def explain(self, request: Request, reason: Reason, record: ProcessRecord) -> str:
        """Why *record* did not take it, in words: the reason's own, unless the kind knows more."""
        return reason.value

    def from_text(self, text: str, targets: Targets) -> Request:
        """The command a client sent as config text; ConfigTextError names a bad value."""
        assert self.declaration is not None, f"{self.kind.value} has no config text"
        request: Request = self.declaration.read(text, targets)
        return request

    @abc.abstractmethod
    async def deliver(self, request: Request, result: CommandResult) -> None:
        """Send the command to the processes that take it, and complete their outcomes."""


class Pausing(Protocol):
    """Runs a request that pauses the monitors it meets: stop → the request → resume
    (:class:`dynolog.kinds.pause.MonitorPause`, which runs its parts through this pipeline)."""

    async def run(self, request: Any) -> CommandResult: ...


class CommandPipeline:
    def __init__(self, registry: Registry, traces: TraceStore) -> None:
        self.registry = registry
        self._traces = traces
        self.pausing: Optional[Pausing] = None  # set by the node, which builds it over this pipeline

    async def run(self, policy: Policy[Request], request: Request) -> CommandResult:
        if self.pausing is not None and policy.pauses_monitor(request):
            return await self.pausing.run(request)
        return await self.run_as_is(policy, request)

    async def run_as_is(self, policy: Policy[Request], request: Request) -> CommandResult:
        """*request* without pausing any monitor: what :attr:`pausing` runs once it stopped them."""
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
                f"{targets.describe()}; see `dyno processes`",
            )
        for record in matched:
            outcome = Outcome(record)
            held = held_by(policy, record) if policy.exclusive else None
            reason = (
                held
                or (self.exclusion(policy, record) if policy.exclusive else None)
                or (None if record.can_run(policy.kind, policy.pulled_by) else Reason.NOT_SUPPORTED)
                or policy.refuse(request, record)
            )
            if reason is None and targets.process_limit and len(result.taken) >= targets.process_limit:
                reason = Reason.PROCESS_LIMIT
            if reason is not None:
                outcome.refuse(reason, self._why(policy, request, reason, record, held is not None))
            result.outcomes.append(outcome)
        return result

    def _why(
        self, policy: Policy[Request], request: Request, reason: Reason, record: ProcessRecord, held: bool
    ) -> str:
        """*reason* in words; for a busy process, what it is busy with (the trace to wait for or cancel)."""
        trace = self._traces.active(record.host_pid) if reason is Reason.TRACE_BUSY else None
        if trace is not None:
            process = trace.processes[record.host_pid]
            window = _steps(process.start_step, process.stop_step)
            return (
                f"busy with trace {trace.trace_id} ({process.phase.name.lower()}{window}): "
                f"`dyno trace {trace.trace_id}` follows it, `--cancel` frees the process"
            )
        if held:
            return f"{policy.explain(request, reason, record)} ({record.profiler} holds its one profiler)"
        if reason is not Reason.TRACE_BUSY:
            return policy.explain(request, reason, record)
        slot = self._traces.slot_of(record)
        if slot.state.busy:
            window = _steps(slot.start_step, slot.stop_step)
            return f"busy with a trace its framework runs ({slot.state.value}{window})"
        return "an earlier command awaits the process's next poll"

    def exclusion(self, policy: Policy[Any], record: ProcessRecord) -> Optional[Reason]:
        """nputrace and npu-monitor exclude each other per process; one trace at a time; one command
        waiting for a polling client at a time."""
        state = self._traces.slot_of(record).state
        if policy.traces:
            if record.monitor_state is MonitorState.RUNNING:
                return Reason.NPU_MONITOR_RUNNING
            if self._traces.active(record.host_pid) is not None or state.busy:
                return Reason.TRACE_BUSY
        elif state is TraceState.RUNNING or (
            # msMonitor lets a monitor start while a trace waits for its step; but where the plugin runs
            # both, the monitor's profiler would keep the trace's from starting.
            state is TraceState.READY and record.accepts_push
        ):
            return Reason.NPU_TRACE_RUNNING
        if record.outbox is not None:
            return Reason.TRACE_BUSY
        return None


def held_by(policy: Policy[Any], record: ProcessRecord) -> Optional[Reason]:
    """The process's own word first: a profiler its plugin says it runs (the slot's holder) excludes any
    other, the service profiler's operator collection included, which nothing else tells the daemon."""
    holder = record.profiler
    if not holder or (policy.kind is CommandKind.NPUMONITOR and holder == MONITOR_HOLDER):
        return None  # free, or a change to the monitor that holds it
    if holder == MONITOR_HOLDER:
        return Reason.NPU_MONITOR_RUNNING
    return Reason.TRACE_BUSY if policy.traces else Reason.NPU_TRACE_RUNNING


def _steps(start: int, stop: int) -> str:
    """A trace's window as ``, steps 10-12`` (*stop* exclusive), or nothing when it has none yet."""
    if start < 0 or stop <= start:
        return ""
    return f", steps {start}-{stop - 1}"


def _refused(result: CommandResult, reason: Reason, message: str) -> CommandResult:
    result.refusal, result.message = reason, message
    return result
