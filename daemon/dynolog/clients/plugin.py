"""This project's plugin: commands are pushed; it reports each trace phase (``mm.event``) and the trace
it holds in every heartbeat, so a restarted daemon adopts traces it did not stage."""

from __future__ import annotations

import logging

from msmonitor_plugin import wire
from msmonitor_plugin.vocabulary import TracePhase

from ..delivery import Delivery
from ..registry import ProcessRecord
from ..traces import TraceStore

log = logging.getLogger("dynolog.trace")


class PluginClient:
    def __init__(self, traces: TraceStore, delivery: Delivery) -> None:
        self._traces = traces
        self._delivery = delivery

    def hello(self, record: ProcessRecord, hello: wire.Hello) -> None:
        """A trace the process holds that this daemon does not know (it restarted since) is adopted."""
        if hello.trace_id and self._traces.active(record.host_pid) is None and not self._ended(hello, record):
            self._traces.adopt(record, hello.trace_id, TracePhase.reported(hello.trace_phase))

    def _ended(self, hello: wire.Hello, record: ProcessRecord) -> bool:
        """Whether this process already finished the hello's trace: a heartbeat built just before its
        last event may arrive just after it, and must not bring the trace back."""
        trace = self._traces.get(hello.trace_id)
        process = trace.processes.get(record.host_pid) if trace is not None else None
        return process is not None and process.phase.final

    def event(self, record: ProcessRecord, event: wire.TraceEvent) -> None:
        trace = self._traces.get(event.trace_id)
        if trace is None or record.host_pid not in trace.processes:
            log.info("event for unknown trace %s from pid %d: adopting it", event.trace_id, record.host_pid)
            trace = self._traces.adopt(record, event.trace_id, TracePhase.READY)
        process = trace.processes[record.host_pid]
        process.current_step, process.start_step, process.stop_step = (
            event.current_step,
            event.start_step,
            event.stop_step,
        )
        if event.output:
            process.output = event.output
        process.files[:] = event.files
        process.size_bytes = event.size_bytes
        process.error = event.error
        process.warnings[:] = event.warnings
        phase = TracePhase.reported(event.phase) or TracePhase.FAILED
        self._delivery.answered(record.host_pid, trace.kind, trace.trace_id, final=phase.final)
        self._traces.set_phase(trace, process, phase)
