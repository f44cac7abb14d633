"""Trace commands from `dyno` to processes and their lifecycle back: decide, stage, deliver, follow.

One trace id per command; per process a :class:`TraceProcess` that moves
STAGED → (DELIVERED | READY) → RUNNING → FINISHED | FAILED. Plugin processes get the command pushed at
once and report every phase; stock Kineto takes it at its next poll and reports nothing, so its
progress is read from its polls (busy while tracing) and from the file it writes.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, OrderedDict, Set, Tuple

from dynoproto import dynolog_pb2 as pb
from msmonitor_plugin import wire

from . import configtext, targeting
from .registry import ClientKind, MonitorState, ProcessRecord, Registry, TraceState

log = logging.getLogger("dynolog.trace")

KINETO_IDLE_POLLS = 5  # free polls after delivery, without a file, before a Kineto trace counts as dropped
MAX_TRACES = 1000  # kept for `dyno trace`; the oldest are forgotten first
_ACTIVE = (pb.TRACE_PHASE_STAGED, pb.TRACE_PHASE_DELIVERED, pb.TRACE_PHASE_READY, pb.TRACE_PHASE_RUNNING)
_PHASES = {
    wire.PHASE_READY: pb.TRACE_PHASE_READY,
    wire.PHASE_RUNNING: pb.TRACE_PHASE_RUNNING,
    wire.PHASE_FINISHED: pb.TRACE_PHASE_FINISHED,
    wire.PHASE_FAILED: pb.TRACE_PHASE_FAILED,
}
_REASON_TEXT = {
    pb.REASON_NPU_MONITOR_RUNNING: "npu-monitor is running there (dyno npu-monitor --npu-monitor-stop first)",
    pb.REASON_TRACE_BUSY: "a trace is already pending or running there",
    pb.REASON_START_STEP_PASSED: "its start step has already begun",
    pb.REASON_PROCESS_LIMIT: "beyond --process-limit",
    pb.REASON_NOT_SUPPORTED: "no client in that process runs this command (stock Kineto runs gputrace only; "
    "in torch_npu and MindSpore jobs their monitor process takes nputrace)",
}

# Sends a datagram to a plugin process; False when it could not be queued.
Pusher = Callable[[ProcessRecord, bytes], bool]


@dataclass
class Trace:
    trace_id: str
    kind: str
    created_at: float = field(default_factory=time.time)
    processes: Dict[int, pb.TraceProcess] = field(default_factory=dict)  # by host pid
    config: Dict[int, str] = field(default_factory=dict)  # staged text per host pid, until taken
    pulled: Set[int] = field(default_factory=set)  # host pids that took it by polling (stock Kineto)
    idle_polls: Dict[int, int] = field(default_factory=dict)  # polls since delivery without starting
    updated: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def done(self) -> bool:
        return all(p.phase not in _ACTIVE for p in self.processes.values())

    def changed(self) -> None:
        """Wake every watcher; later waits use a fresh event."""
        self.updated.set()
        self.updated = asyncio.Event()

    def info(self) -> pb.TraceInfo:
        return pb.TraceInfo(
            trace_id=self.trace_id,
            kind=self.kind,
            created_at=self.created_at,
            processes=list(self.processes.values()),
            done=self.done,
        )


@dataclass
class Decision:
    record: ProcessRecord
    reason: pb.Reason = pb.REASON_UNSPECIFIED

    @property
    def triggered(self) -> bool:
        return self.reason == pb.REASON_UNSPECIFIED


class TraceManager:
    def __init__(self, registry: Registry, push: Pusher) -> None:
        self.registry = registry
        self._push = push
        self._traces: OrderedDict[str, Trace] = collections.OrderedDict()
        self._by_process: Dict[int, str] = {}  # host pid -> its active trace id
        self._hostname = socket.gethostname()

    # --- commands from dyno ---------------------------------------------------------------------

    def npu_trace(self, request: pb.NpuTraceRequest) -> pb.CommandResponse:
        text = configtext.npu_trace(request)

        def expected(record: ProcessRecord) -> str:
            host = record.hostname or self._hostname
            return f"{request.log_file.rstrip('/')}/{host}_{record.pid}_<timestamp>_<backend>/"

        def decide(record: ProcessRecord) -> pb.Reason:
            if not record.can_run(wire.NPUTRACE):
                return pb.REASON_NOT_SUPPORTED
            if request.iterations > 0 and 0 <= request.start_step <= record.current_step:
                return pb.REASON_START_STEP_PASSED
            return pb.REASON_UNSPECIFIED

        return self._command(wire.NPUTRACE, text, request.targets, decide, expected)

    def gpu_trace(self, request: pb.GpuTraceRequest) -> pb.CommandResponse:
        text = configtext.gpu_trace(request)
        return self._command(
            wire.GPUTRACE,
            text,
            request.targets,
            lambda record: (
                pb.REASON_UNSPECIFIED if record.can_run(wire.GPUTRACE) else pb.REASON_NOT_SUPPORTED
            ),
            lambda record: configtext.kineto_output_file(request.log_file, record.pid),
        )

    def _command(
        self,
        kind: str,
        text: str,
        targets: pb.Targets,
        decide: Callable[[ProcessRecord], pb.Reason],
        expected: Callable[[ProcessRecord], str],
    ) -> pb.CommandResponse:
        if len(self.registry) == 0:
            return ineffective(
                pb.REASON_NO_PROCESS_REGISTERED,
                "no process is registered with this daemon: start jobs with MSMONITOR_USE_DAEMON=1 "
                "(or KINETO_USE_DAEMON=1 for gputrace) and check `dyno processes`",
            )
        matched = targeting.select(self.registry, targets)
        if not matched:
            return ineffective(
                pb.REASON_NO_PROCESS_MATCHED,
                f"none of the {len(self.registry)} registered processes matches {_describe(targets)}; "
                "see `dyno processes`",
            )
        decisions = self._decide(matched, targets.process_limit, decide)
        trace = self._new_trace(kind)
        response = pb.CommandResponse(trace_id=trace.trace_id)
        for d in decisions:
            outcome = pb.ProcessOutcome(
                pid=d.record.pid, host_pid=d.record.host_pid, rank=d.record.rank, triggered=d.triggered
            )
            if d.triggered:
                outcome.expected_output = expected(d.record)
                self._stage(
                    trace, d.record, configtext.with_trace_id(text, trace.trace_id), outcome.expected_output
                )
            else:
                outcome.reason, outcome.detail = d.reason, _REASON_TEXT[d.reason]
            response.processes.append(outcome)
        self._fill_dynolog_fields(response, decisions)
        triggered = [d for d in decisions if d.triggered]
        if not triggered:
            del self._traces[trace.trace_id]
            reason = collections.Counter(d.reason for d in decisions).most_common(1)[0][0]
            response.trace_id = ""
            response.command_status = pb.COMMAND_STATUS_INEFFECTIVE
            response.reason = reason
            response.message = f"no matched process can take the {kind}: {_REASON_TEXT[reason]}"
            return response
        response.command_status = pb.COMMAND_STATUS_EFFECTIVE
        response.message = (
            f"{kind} {trace.trace_id} sent to {len(triggered)} of {len(decisions)} matched processes"
        )
        log.info("%s", response.message)
        return response

    def _decide(
        self,
        matched: List[ProcessRecord],
        limit: int,
        decide: Callable[[ProcessRecord], pb.Reason],
    ) -> List[Decision]:
        decisions, taken = [], 0
        for record in matched:
            reason = self._availability(record) or decide(record)
            if reason == pb.REASON_UNSPECIFIED and limit and taken >= limit:
                reason = pb.REASON_PROCESS_LIMIT
            taken += reason == pb.REASON_UNSPECIFIED
            decisions.append(Decision(record, reason))
        return decisions

    def _availability(self, record: ProcessRecord) -> pb.Reason:
        """nputrace and npu-monitor exclude each other per process; one trace at a time."""
        if record.monitor_state is MonitorState.RUNNING:
            return pb.REASON_NPU_MONITOR_RUNNING
        busy_states = (TraceState.READY, TraceState.RUNNING)
        if (
            record.host_pid in self._by_process
            or record.trace_state in busy_states
            or record.outbox is not None
        ):
            return pb.REASON_TRACE_BUSY
        return pb.REASON_UNSPECIFIED

    def _new_trace(self, kind: str) -> Trace:
        # Decimal, as dynolog's REQUEST_TRACE_ID: Kineto copies it into the trace's "trace_id".
        return self._remember(Trace(str(secrets.randbelow(10**18 - 10**17) + 10**17), kind))

    def _remember(self, trace: Trace) -> Trace:
        """Keep *trace*; beyond MAX_TRACES forget the oldest finished one (else the oldest at all)."""
        self._traces[trace.trace_id] = trace
        while len(self._traces) > MAX_TRACES:
            oldest = next((t for t in self._traces.values() if t.done), None) or next(
                iter(self._traces.values())
            )
            del self._traces[oldest.trace_id]
            for host_pid in [p for p, t in self._by_process.items() if t == oldest.trace_id]:
                del self._by_process[host_pid]
        return trace

    def _stage(self, trace: Trace, record: ProcessRecord, text: str, output: str) -> None:
        now = time.time()
        trace.processes[record.host_pid] = pb.TraceProcess(
            pid=record.pid,
            host_pid=record.host_pid,
            rank=record.rank,
            phase=pb.TRACE_PHASE_STAGED,
            current_step=record.current_step,
            output=output,
            updated_at=now,
            history=[pb.PhaseChange(phase=pb.TRACE_PHASE_STAGED, at=now)],
        )
        self._by_process[record.host_pid] = trace.trace_id
        if record.accepts_push:
            trace.config[record.host_pid] = text  # kept to push again if the push was lost
            self._push_command(trace, record)
        else:
            record.outbox = text

    def _push_command(self, trace: Trace, record: ProcessRecord) -> None:
        command = wire.Command(kind=trace.kind, trace_id=trace.trace_id, config=trace.config[record.host_pid])
        self._push(record, wire.encode(wire.COMMAND, command.to_payload()))

    @staticmethod
    def _fill_dynolog_fields(response: pb.CommandResponse, decisions: List[Decision]) -> None:
        response.processes_matched.extend(d.record.pid for d in decisions)
        response.activity_profilers_triggered.extend(d.record.pid for d in decisions if d.triggered)
        response.activity_profilers_busy = sum(d.reason == pb.REASON_TRACE_BUSY for d in decisions)

    # --- what processes tell us -----------------------------------------------------------------

    def poll(self, record: ProcessRecord, config_type: int) -> bytes:
        """The reply to a ``req``: the staged config, once.

        msMonitor clients take any staged command at once and report progress in status structs. Stock
        Kineto takes a config only while its activity profiler is free (the type bit), and its progress
        is read from its polls: busy while tracing, free again when done.
        """
        if record.accepts_push:
            return b""  # the plugin in the same process takes commands by push: one delivery only
        if ClientKind.MSMONITOR in record.clients:
            return self._take_outbox(record)
        busy = not config_type & wire.CONFIG_ACTIVITIES
        record.trace_state = TraceState.RUNNING if busy else TraceState.IDLE
        trace = self._active_trace(record.host_pid)
        if trace is None:
            return b""
        process = trace.processes[record.host_pid]
        if process.phase == pb.TRACE_PHASE_STAGED and not busy:
            return self._take_outbox(record)
        if process.phase == pb.TRACE_PHASE_DELIVERED and busy:
            self._set_phase(trace, process, pb.TRACE_PHASE_RUNNING)
        elif process.phase == pb.TRACE_PHASE_RUNNING and not busy:  # busy, then free again: it is done
            self._check_kineto_file(trace, process)
        elif process.phase == pb.TRACE_PHASE_DELIVERED:
            # Kineto may take a poll or two to show it accepted; after that, it dropped the config.
            polls = trace.idle_polls[record.host_pid] = trace.idle_polls.get(record.host_pid, 0) + 1
            self._check_kineto_file(trace, process, final=polls >= KINETO_IDLE_POLLS)
        return b""

    def _take_outbox(self, record: ProcessRecord) -> bytes:
        """Hand a polling client its staged command (a trace's, or an npu-monitor command)."""
        text, record.outbox = record.outbox, None
        if text is None:
            return b""
        trace = self._active_trace(record.host_pid)
        if trace is not None and trace.processes[record.host_pid].phase == pb.TRACE_PHASE_STAGED:
            trace.pulled.add(record.host_pid)
            self._set_phase(trace, trace.processes[record.host_pid], pb.TRACE_PHASE_DELIVERED)
        return (text + "\n").encode()

    def npu_status(self, record: ProcessRecord, status: wire.NpuStatus) -> None:
        """msMonitor clients report a trace through status structs: Ready (2), Running (1), then Idle (0).

        torch_npu polls from a helper process but reports from the training process, its parent: the
        trace taken by a process's helper is that process's trace.
        """
        found = self._pulled_trace_of(record)
        if found is None:
            return
        trace, process = found
        process.current_step = status.current_step
        if status.status in (1, 2):
            process.start_step, process.stop_step = status.start_step, status.stop_step
            phase = pb.TRACE_PHASE_RUNNING if status.status == 1 else pb.TRACE_PHASE_READY
            return self._set_phase(trace, process, phase)
        if status.status == 0 and process.phase == pb.TRACE_PHASE_RUNNING:
            process.files[:] = _framework_outputs(process.output, trace.created_at)
            return self._set_phase(trace, process, pb.TRACE_PHASE_FINISHED)
        if status.status == -1:
            process.error = (
                "the framework's monitor process left (status Uninitialized) before the trace finished"
            )
            self._set_phase(trace, process, pb.TRACE_PHASE_FAILED)

    def _pulled_trace_of(self, record: ProcessRecord) -> Optional[Tuple[Trace, pb.TraceProcess]]:
        for host_pid, trace_id in self._by_process.items():
            trace = self._traces.get(trace_id)
            if trace is None or host_pid not in trace.pulled:
                continue
            taker = self.registry.get(host_pid)
            if host_pid == record.host_pid or (taker is not None and record.host_pid in taker.host_ancestors):
                return trace, trace.processes[host_pid]
        return None

    def plugin_hello(self, record: ProcessRecord, hello: wire.Hello) -> None:
        trace = self._active_trace(record.host_pid)
        if (
            trace is not None
            and trace.processes[record.host_pid].phase == pb.TRACE_PHASE_STAGED
            and record.accepts_push
        ):
            self._push_command(trace, record)  # the push may have been lost; the plugin ignores repeats
        elif trace is None and hello.trace_id:
            self._adopt(record, hello)

    def event(self, record: ProcessRecord, event: wire.TraceEvent) -> None:
        trace = self._traces.get(event.trace_id)
        if trace is None or record.host_pid not in trace.processes:
            log.info("event for unknown trace %s from pid %d: adopting it", event.trace_id, record.host_pid)
            trace = self._adopt(record, wire.Hello(pid=record.pid, trace_id=event.trace_id))
        process = trace.processes[record.host_pid]
        process.current_step, process.start_step, process.stop_step = (
            event.current_step,
            event.start_step,
            event.stop_step,
        )
        record.trace_steps = (event.start_step, event.stop_step)
        if event.output:
            process.output = event.output
        process.files[:] = event.files
        process.error = event.error
        process.warnings[:] = event.warnings
        trace.config.pop(record.host_pid, None)
        record.trace_state = {
            wire.PHASE_READY: TraceState.READY,
            wire.PHASE_RUNNING: TraceState.RUNNING,
        }.get(event.phase, TraceState.IDLE)
        self._set_phase(trace, process, _PHASES.get(event.phase, pb.TRACE_PHASE_FAILED))

    def process_gone(self, record: ProcessRecord, why: str) -> None:
        trace = self._active_trace(record.host_pid)
        if trace is not None:
            process = trace.processes[record.host_pid]
            process.error = f"the process {why} at step {record.current_step} before the trace finished"
            self._set_phase(trace, process, pb.TRACE_PHASE_FAILED)

    # --- lookups ----------------------------------------------------------------------------------

    def get(self, trace_id: str) -> Optional[Trace]:
        return self._traces.get(trace_id)

    def refresh(self, trace: Trace) -> None:
        """Look for the files of stock Kineto processes, which never say they finished."""
        for host_pid in trace.pulled:
            process = trace.processes[host_pid]
            if process.phase in (pb.TRACE_PHASE_DELIVERED, pb.TRACE_PHASE_RUNNING):
                self._check_kineto_file(trace, process, final=False)

    def _active_trace(self, host_pid: int) -> Optional[Trace]:
        trace_id = self._by_process.get(host_pid)
        return self._traces.get(trace_id) if trace_id is not None else None

    def _adopt(self, record: ProcessRecord, hello: wire.Hello) -> Trace:
        """A trace this daemon did not stage (it restarted since): follow it from now on."""
        trace = self._traces.get(hello.trace_id) or self._remember(Trace(hello.trace_id, wire.NPUTRACE))
        trace.processes.setdefault(
            record.host_pid,
            pb.TraceProcess(
                pid=record.pid, host_pid=record.host_pid, rank=record.rank, phase=pb.TRACE_PHASE_READY
            ),
        )
        if hello.trace_phase:
            trace.processes[record.host_pid].phase = _PHASES.get(hello.trace_phase, pb.TRACE_PHASE_READY)
        self._by_process[record.host_pid] = trace.trace_id
        return trace

    def _check_kineto_file(self, trace: Trace, process: pb.TraceProcess, final: bool = True) -> None:
        if os.path.isfile(process.output):
            process.files[:] = [process.output]
            self._set_phase(trace, process, pb.TRACE_PHASE_FINISHED)
        elif final:
            process.error = (
                f"Kineto did not write {process.output} (it ignored the config, or the directory is "
                "missing); see the process's own log"
            )
            self._set_phase(trace, process, pb.TRACE_PHASE_FAILED)

    def _set_phase(self, trace: Trace, process: pb.TraceProcess, phase: pb.TracePhase) -> None:
        process.updated_at = time.time()
        if process.phase != phase:
            process.history.add(phase=phase, at=process.updated_at)
        process.phase = phase
        if phase not in _ACTIVE and self._by_process.get(process.host_pid) == trace.trace_id:
            del self._by_process[process.host_pid]
            trace.config.pop(process.host_pid, None)
        trace.changed()


def _framework_outputs(expected: str, since: float) -> List[str]:
    """The directories torch_npu / MindSpore wrote under the --log-file since the trace was sent."""
    root = os.path.dirname(expected.rstrip("/"))  # expected: <log-file>/<host>_<pid>_<timestamp>_<backend>/
    try:
        entries = [os.path.join(root, name) for name in os.listdir(root)]
    except OSError:
        return []
    return sorted(p for p in entries if os.path.isdir(p) and os.path.getmtime(p) >= since - 1)


def ineffective(reason: pb.Reason, message: str) -> pb.CommandResponse:
    return pb.CommandResponse(command_status=pb.COMMAND_STATUS_INEFFECTIVE, reason=reason, message=message)


def _describe(targets: pb.Targets) -> str:
    parts = []
    if targets.job_id:
        parts.append(f"job {targets.job_id}")
    if targets.pids:
        parts.append(f"pids {','.join(map(str, targets.pids))}")
    if targets.ranks:
        parts.append(f"ranks {','.join(map(str, targets.ranks))}")
    return " and ".join(parts) or "the command"
