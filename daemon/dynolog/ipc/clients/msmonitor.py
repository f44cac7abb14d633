"""msMonitor's contract (torch_npu and MindSpore through ``IPCMonitor``): a helper process polls with
``req`` and takes any staged command at once; the training process reports its trace in status structs
(``npuTraceStatus``: Ready 2, Running 1, then Idle 0; -1 when its monitor process left). The training
process reports at most once a second, so a short window may go from Ready straight to Idle."""

from __future__ import annotations

import os
from typing import Optional, Tuple

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import CommandKind, MonitorState, TracePhase, TraceState

from ...core.registry import ClientKind, ProcessRecord, Registry
from ...core.traces import ProcessTrace, Trace, TraceStore, framework_outputs
from ..endpoint import Sender
from . import polling

# msMonitor's status struct values.
_TRACE_STATES = {-1: TraceState.UNINITIALIZED, 0: TraceState.IDLE, 1: TraceState.RUNNING, 2: TraceState.READY}
_MONITOR_STATES = {-1: MonitorState.UNINITIALIZED, 0: MonitorState.IDLE, 1: MonitorState.RUNNING}


class MsMonitorClient:
    def __init__(self, registry: Registry, traces: TraceStore) -> None:
        self._registry = registry
        self._traces = traces

    def register(self, sender: Sender, context: wire.KinetoContext) -> ProcessRecord:
        """A ``ctxt`` (msMonitor's registration): answered with the peers on its (job, device)."""
        record = self._registry.touch(sender, context.pid, ClientKind.MSMONITOR)
        record.devices = record.devices or (context.device,)  # the framework's npu id
        if ClientKind.PLUGIN not in record.clients:
            record.job_id, record.backend = context.job_id, "msmonitor"
            # msMonitor's init_dyno reports Idle for both right after registering.
            if record.framework_trace is TraceState.UNINITIALIZED:
                record.framework_trace = TraceState.IDLE
            if record.monitor_state is MonitorState.UNINITIALIZED:
                record.monitor_state = MonitorState.IDLE
        self._registry.join_context(record, (context.job_id, context.device))
        return record

    def poll(self, record: ProcessRecord) -> bytes:
        return polling.take(self._traces, record)

    @staticmethod
    def monitor_status(record: ProcessRecord, status: wire.NpuStatus) -> None:
        if not record.runs_itself(CommandKind.NPUMONITOR):  # else the plugin's monitor is the one
            record.monitor_state = _MONITOR_STATES.get(status.status, record.monitor_state)

    def trace_status(self, record: ProcessRecord, status: wire.NpuStatus) -> None:
        state = _TRACE_STATES.get(status.status)
        record.framework_trace = state or record.framework_trace
        record.current_step = max(record.current_step, status.current_step)
        record.framework_steps = (status.start_step, status.stop_step)
        found = self._pulled_trace_of(record)
        if found is None:
            return
        trace, process = found
        process.current_step = status.current_step
        if state is not None and state.busy:
            self._window(record, process, status)
            phase = TracePhase.RUNNING if state is TraceState.RUNNING else TracePhase.READY
            return self._traces.set_phase(trace, process, phase)
        if state is TraceState.IDLE and self._over(trace, process):
            self._window(record, process, status)
            return self._ended(trace, process)
        if state is TraceState.UNINITIALIZED:
            process.error = (
                "the framework's monitor process left (status Uninitialized) before the trace finished"
            )
            self._traces.set_phase(trace, process, TracePhase.FAILED)

    @staticmethod
    def _over(trace: Trace, process: ProcessTrace) -> bool:
        """Idle again after the trace started. The status is sent at most once a second, so a window of
        a few short steps runs between two reports: Running (and Ready, which MindSpore never sends)
        may never show. Idle after delivery means it is over only once the framework's files show."""
        if process.phase in (TracePhase.READY, TracePhase.RUNNING):
            return True
        delivered = process.phase == TracePhase.DELIVERED
        return delivered and bool(framework_outputs(process.output, trace.created_at))

    @staticmethod
    def _window(record: ProcessRecord, process: ProcessTrace, status: wire.NpuStatus) -> None:
        """The window as [start, stop): torch_npu reports it so, MindSpore reports its last step."""
        if 0 <= status.start_step <= status.stop_step:
            closed = record.backend == "mindspore"
            process.start_step, process.stop_step = status.start_step, status.stop_step + closed

    def _pulled_trace_of(self, record: ProcessRecord) -> Optional[Tuple[Trace, ProcessTrace]]:
        """The trace this process's framework took: torch_npu polls from a helper process but reports
        from the training process; the registry folds the helper into it, so both are one record."""
        trace = self._traces.active(record.host_pid)
        if trace is None or record.host_pid not in trace.pulled:
            return None
        return trace, trace.processes[record.host_pid]

    def _ended(self, trace: Trace, process: ProcessTrace) -> None:
        process.files[:] = framework_outputs(process.output, trace.created_at)
        if process.files:
            return self._traces.set_phase(trace, process, TracePhase.FINISHED)
        process.error = (
            f"the framework went back to Idle at step {process.current_step} without writing under "
            f"{os.path.dirname(process.output.rstrip('/'))} (it dropped the config: see its own log)"
        )
        self._traces.set_phase(trace, process, TracePhase.FAILED)
