"""The traces this daemon knows: one per trace command, with the lifecycle of each process in it.

Per process a :class:`ProcessTrace` moves STAGED → (DELIVERED | READY) → RUNNING → FINISHED | FAILED; the
store keeps the history of each phase, which process holds which active trace, and the most recent
traces for ``dyno trace``: at most :data:`MAX_TRACES`, with at most :data:`MAX_PROCESS_ENTRIES`
processes among them. How a phase is learnt depends on the client (plugin
events, Kineto's polls, msMonitor's status structs): see ``clients/``.
"""

from __future__ import annotations

import collections
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, OrderedDict, Set, Tuple

from msmonitor_contract.vocabulary import CommandKind, TracePhase, TraceState

from .changed import Changed
from .registry import ProcessRecord

MAX_TRACES = 1000  # kept for `dyno trace`; the oldest are forgotten first
LISTED_TRACES = 20  # what `dyno trace` without an id lists when it names no --limit
# Processes over all kept traces: a finished one keeps ~1.1 KB (its history, files, output), so a
# thousand traces of a thousand processes each would hold ~1.1 GiB; this bounds them to ~22 MiB.
MAX_PROCESS_ENTRIES = 20_000


@dataclass
class ProcessTrace:
    """One process's part in a trace: its phase, steps, where it writes, and what it wrote."""

    pid: int
    host_pid: int
    rank: int
    phase: TracePhase = TracePhase.STAGED
    current_step: int = 0
    start_step: int = 0
    stop_step: int = 0  # exclusive
    output: str = ""  # directory or file
    # The folder the request named (checked against --trace-root), set by the daemon when it stages the
    # trace; the process's reports cannot change it: its files are served only from under it.
    root: str = ""
    uid: int = -1  # the process's user, as the kernel told: its files must be that user's to be served
    files: List[str] = field(default_factory=list)
    size_bytes: int = 0  # of the files
    error: str = ""
    warnings: List[str] = field(default_factory=list)
    updated_at: float = 0.0
    history: List[Tuple[TracePhase, float]] = field(default_factory=list)  # every phase, when learnt

    @classmethod
    def of(cls, record: ProcessRecord, phase: TracePhase) -> ProcessTrace:
        now = time.time()
        return cls(
            record.pid,
            record.host_pid,
            record.rank,
            phase,
            uid=record.uid,
            updated_at=now,
            history=[(phase, now)],
        )


@dataclass
class Trace:
    trace_id: str
    kind: CommandKind
    created_at: float = field(default_factory=time.time)
    processes: Dict[int, ProcessTrace] = field(default_factory=dict)  # by host pid
    pulled: Set[int] = field(default_factory=set)  # host pids that took it by polling
    idle_polls: Dict[int, int] = field(default_factory=dict)  # polls since delivery without starting
    changes: Changed = field(default_factory=Changed)
    # Learnt from a process's word, not issued by this daemon (a previous one did, or nobody): forgotten
    # before the traces this daemon issued, so no process's claims can push those out.
    adopted: bool = False

    @property
    def done(self) -> bool:
        return all(p.phase.final for p in self.processes.values())


class TraceSlot(NamedTuple):
    """A process's trace slot as ``dyno processes`` and msMonitor's getStatus show it."""

    state: TraceState
    start_step: int = -1
    stop_step: int = -1


class TraceStore:
    def __init__(self) -> None:
        self._traces: OrderedDict[str, Trace] = collections.OrderedDict()
        self._by_process: Dict[int, str] = {}  # host pid -> its active trace id
        self._entries = 0  # processes over all kept traces
        self._grew = Changed()  # a trace was added

    def new(self, kind: CommandKind) -> Trace:
        # Decimal, as dynolog's REQUEST_TRACE_ID: Kineto copies it into the trace's "trace_id".
        return self._remember(Trace(str(secrets.randbelow(10**18 - 10**17) + 10**17), kind))

    def discard(self, trace: Trace) -> None:
        """Forget a trace no process took."""
        if self._traces.pop(trace.trace_id, None) is not None:
            self._entries -= len(trace.processes)

    def get(self, trace_id: str) -> Optional[Trace]:
        return self._traces.get(trace_id)

    def recent(self, limit: int) -> List[Trace]:
        """The *limit* traces learnt last, newest first."""
        newest = reversed(self._traces.values())
        return [trace for _, trace in zip(range(limit), newest)]

    async def learnt(self, trace_id: str, timeout: float) -> Optional[Trace]:
        """*trace_id* once this daemon knows it (a process may report it any moment), or None after
        *timeout* seconds."""
        await self._grew.until(lambda: trace_id in self._traces, timeout)
        return self._traces.get(trace_id)

    def active(self, host_pid: int) -> Optional[Trace]:
        """The trace this process holds (staged, delivered, ready or running), if any."""
        trace_id = self._by_process.get(host_pid)
        return self._traces.get(trace_id) if trace_id is not None else None

    def slot_of(self, record: ProcessRecord) -> TraceSlot:
        """What a framework running its own profiler reports while it is busy; else the trace this
        daemon follows there, while it waits for its step or runs; else the framework's word."""
        framework = TraceSlot(record.framework_trace, *record.framework_steps)
        trace = self.active(record.host_pid)
        if framework.state.busy or trace is None:
            return framework
        process = trace.processes[record.host_pid]
        state = process.phase.state()
        return TraceSlot(state, process.start_step, process.stop_step) if state.busy else framework

    def stage(self, trace: Trace, record: ProcessRecord, output: str) -> ProcessTrace:
        process = self._add(trace, ProcessTrace.of(record, TracePhase.STAGED))
        process.current_step, process.output = record.current_step, output
        process.root = os.path.dirname(output.rstrip("/"))  # <log-file>/<host>_<pid>_…/ or <dir>/<file>
        return process

    def adopt(self, record: ProcessRecord, trace_id: str, phase: Optional[TracePhase]) -> Trace:
        """A trace this daemon did not stage (it restarted since): follow it from now on. Whether the
        process may bring it is ``clients.plugin.Adoptions``' to say."""
        trace = self._traces.get(trace_id) or self._remember(
            Trace(trace_id, CommandKind.NPUTRACE, adopted=True)
        )
        process = trace.processes.get(record.host_pid) or self._add(
            trace, ProcessTrace(record.pid, record.host_pid, record.rank, TracePhase.READY)
        )
        if phase is not None:
            process.phase = phase
        self._by_process[record.host_pid] = trace.trace_id
        return trace

    def set_phase(self, trace: Trace, process: ProcessTrace, phase: TracePhase) -> None:
        process.updated_at = time.time()
        if process.phase != phase:
            process.history.append((phase, process.updated_at))
        process.phase = phase
        if phase.final and self._by_process.get(process.host_pid) == trace.trace_id:
            del self._by_process[process.host_pid]
        trace.changes.notify()

    def fail(self, host_pid: int, error: str) -> None:
        """The process's active trace failed (it left, say)."""
        trace = self.active(host_pid)
        if trace is not None:
            process = trace.processes[host_pid]
            process.error = error
            self.set_phase(trace, process, TracePhase.FAILED)

    def _add(self, trace: Trace, process: ProcessTrace) -> ProcessTrace:
        """*process* takes part in *trace*, and holds it as its active trace."""
        if process.host_pid not in trace.processes:
            self._entries += 1
        trace.processes[process.host_pid] = process
        self._by_process[process.host_pid] = trace.trace_id
        self._trim(trace)
        return process

    def _remember(self, trace: Trace) -> Trace:
        self._traces[trace.trace_id] = trace
        self._trim(trace)
        self._grew.notify()
        return trace

    def _trim(self, keep: Trace) -> None:
        """Beyond MAX_TRACES, or MAX_PROCESS_ENTRIES, forget the oldest finished trace (else the oldest
        adopted one, else the oldest at all), never *keep*: the one just added to."""
        while len(self._traces) > MAX_TRACES or self._entries > MAX_PROCESS_ENTRIES:
            others = [t for t in self._traces.values() if t is not keep]
            oldest = (
                next((t for t in others if t.done), None)
                or next((t for t in others if t.adopted), None)
                or next(iter(others), None)
            )
            if oldest is None:
                return
            del self._traces[oldest.trace_id]
            self._entries -= len(oldest.processes)
            for host_pid in [p for p, t in self._by_process.items() if t == oldest.trace_id]:
                del self._by_process[host_pid]


def framework_outputs(expected: str, since: float) -> List[str]:
    """The directories torch_npu / MindSpore wrote under the --log-file since the trace was sent."""
    root = os.path.dirname(expected.rstrip("/"))  # expected: <log-file>/<host>_<pid>_<timestamp>_<backend>/
    try:
        entries = [os.path.join(root, name) for name in os.listdir(root)]
    except OSError:
        return []
    return sorted(p for p in entries if os.path.isdir(p) and os.path.getmtime(p) >= since - 1)
