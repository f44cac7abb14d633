"""msMonitor's contract (torch_npu and MindSpore through ``IPCMonitor``): a helper process polls with
``req`` and takes any staged command at once; the training process reports its trace in status structs
(``npuTraceStatus``: Ready 2, Running 1, then Idle 0; -1 when its monitor process left)."""

from __future__ import annotations

from typing import Optional, Tuple

from msmonitor_plugin import wire
from msmonitor_plugin.vocabulary import TracePhase

from ..registry import ProcessRecord, Registry
from ..traces import ProcessTrace, Trace, TraceStore, framework_outputs
from . import outbox


class MsMonitorClient:
    def __init__(self, registry: Registry, traces: TraceStore) -> None:
        self._registry = registry
        self._traces = traces

    def poll(self, record: ProcessRecord) -> bytes:
        return outbox.take(self._traces, record)

    def trace_status(self, record: ProcessRecord, status: wire.NpuStatus) -> None:
        found = self._pulled_trace_of(record)
        if found is None:
            return
        trace, process = found
        process.current_step = status.current_step
        if status.status in (1, 2):
            process.start_step, process.stop_step = status.start_step, status.stop_step
            phase = TracePhase.RUNNING if status.status == 1 else TracePhase.READY
            return self._traces.set_phase(trace, process, phase)
        if status.status == 0 and process.phase == TracePhase.RUNNING:
            process.files[:] = framework_outputs(process.output, trace.created_at)
            return self._traces.set_phase(trace, process, TracePhase.FINISHED)
        if status.status == -1:
            process.error = (
                "the framework's monitor process left (status Uninitialized) before the trace finished"
            )
            self._traces.set_phase(trace, process, TracePhase.FAILED)

    def _pulled_trace_of(self, record: ProcessRecord) -> Optional[Tuple[Trace, ProcessTrace]]:
        """torch_npu polls from a helper process but reports from the training process, its parent:
        the trace taken by a process's helper is that process's trace."""
        for host_pid, trace in self._traces.holders().items():
            if host_pid not in trace.pulled:
                continue
            taker = self._registry.get(host_pid)
            if host_pid == record.host_pid or (taker is not None and record.host_pid in taker.host_ancestors):
                return trace, trace.processes[host_pid]
        return None
