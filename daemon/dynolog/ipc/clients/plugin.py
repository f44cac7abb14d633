"""This project's plugin: commands are pushed; it reports each trace phase (``mm.event``) and the trace
it holds in every heartbeat, so a restarted daemon adopts traces it did not stage (:class:`Adoptions`
says which)."""

from __future__ import annotations

import logging
import os
from typing import Optional

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import CommandKind, MonitorState, TracePhase, TraceState, trace_holder

from ...core.delivery import Delivery
from ...core.logs import Once
from ...core.registry import ClientKind, ProcessRecord, Registry
from ...core.traces import Trace, TraceStore
from ..endpoint import Sender

log = logging.getLogger("dynolog.trace")

ADOPTION_PERIOD_S = 60.0  # one adoption per process in this long; a process holds one trace at a time


class Adoptions:
    """Which trace ids a process may bring to this daemon. Every adopted id is a trace kept (the store
    keeps MAX_TRACES), so a process's word alone must not add them: only a process that was running
    before this daemon started can hold a trace it did not issue (a previous daemon's), one trace an
    ADOPTION_PERIOD_S at most, and never a trace this daemon issued to others. Refusals are logged once
    a period per process."""

    def __init__(self, traces: TraceStore) -> None:
        self._traces = traces
        self._daemon_started = _start_ticks(os.getpid())
        self._granted = Once(ADOPTION_PERIOD_S)
        self._told = Once(ADOPTION_PERIOD_S)

    def adopt(self, record: ProcessRecord, trace_id: str, phase: Optional[TracePhase]) -> Optional[Trace]:
        """The trace, adopted; None if the process may not bring it."""
        refusal = self._refusal(record, trace_id)
        if refusal:
            if self._told(record.host_pid):
                log.warning("trace %.40r from pid %d not adopted: %s", trace_id, record.host_pid, refusal)
            return None
        log.info("trace %.40r from pid %d: adopting it", trace_id, record.host_pid)
        return self._traces.adopt(record, trace_id, phase)

    def _refusal(self, record: ProcessRecord, trace_id: str) -> str:
        known = self._traces.get(trace_id)
        if known is not None and not known.adopted:
            return "this daemon issued it to other processes"
        started = _start_ticks(record.host_pid)
        if started is None or self._daemon_started is None:
            return "/proc does not say when the process started"
        if started > self._daemon_started:
            return "the process started after this daemon, so no earlier daemon gave it a trace"
        if not self._granted(record.host_pid):
            return f"it adopted one in the last {ADOPTION_PERIOD_S:.0f} s"
        return ""


def _start_ticks(host_pid: int) -> Optional[int]:
    """When the process started, in clock ticks since boot (``/proc/<pid>/stat`` field 22); None if gone."""
    try:
        with open(f"/proc/{host_pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


class PluginClient:
    def __init__(self, registry: Registry, traces: TraceStore, delivery: Delivery) -> None:
        self._registry = registry
        self._traces = traces
        self._delivery = delivery
        self._adoptions = Adoptions(traces)

    def register(self, sender: Sender, hello: wire.Hello) -> ProcessRecord:
        """A hello (also the heartbeat): the process as its plugin describes it, but for its pids and
        ancestors, which the registry reads from /proc (the hello's ancestors select nothing)."""
        record = self._registry.touch(sender, hello.pid, ClientKind.PLUGIN)
        if self._registry.is_helper(sender.pid):  # its job's plugin speaks for the process
            return record
        record.job_id = hello.job_id
        record.rank, record.local_rank, record.world_size = hello.rank, hello.local_rank, hello.world_size
        record.devices = tuple(hello.devices) or record.devices  # keep a ctxt's device id
        self._registry.set_backend(record, hello.backend)
        record.hostname = hello.hostname
        record.versions = dict(hello.versions)
        record.plugin_version = hello.plugin_version
        record.capabilities = tuple(hello.capabilities)
        record.service_profiler = hello.service
        # A heartbeat built just before the trace's last event names the trace as holder: it holds no more.
        record.profiler = "" if hello.trace_id and self._ended(hello, record) else hello.profiler
        record.current_step = max(record.current_step, hello.step)
        # The traces the plugin runs itself are the trace store's (it adopts what the hello names after a
        # daemon restart); the rest (torch_npu's own traces, say) is reported in msMonitor's status structs.
        if record.runs_itself(CommandKind.NPUTRACE):
            record.framework_trace = TraceState.IDLE
        if "push" in hello.capabilities and hello.monitor_state in (MonitorState.IDLE, MonitorState.RUNNING):
            record.monitor_state = MonitorState(hello.monitor_state)
        if record.monitor_state is MonitorState.UNINITIALIZED:
            record.monitor_state = MonitorState.IDLE
        return record

    def hello(self, record: ProcessRecord, hello: wire.Hello) -> None:
        """A trace the process holds that this daemon does not know (it restarted since) is adopted."""
        if hello.trace_id and self._traces.active(record.host_pid) is None and not self._ended(hello, record):
            self._adoptions.adopt(record, hello.trace_id, TracePhase.reported(hello.trace_phase))

    def _ended(self, hello: wire.Hello, record: ProcessRecord) -> bool:
        """Whether this process already finished the hello's trace: a heartbeat built just before its
        last event may arrive just after it, and must not bring the trace back."""
        trace = self._traces.get(hello.trace_id)
        process = trace.processes.get(record.host_pid) if trace is not None else None
        return process is not None and process.phase.final

    def event(self, record: ProcessRecord, event: wire.TraceEvent) -> None:
        trace = self._traces.get(event.trace_id)
        if trace is None or record.host_pid not in trace.processes:
            trace = self._adoptions.adopt(record, event.trace_id, TracePhase.READY)
            if trace is None:
                return
        process = trace.processes[record.host_pid]
        phase = TracePhase.reported(event.phase) or TracePhase.FAILED
        if process.phase.final or phase.order < process.phase.order:
            log.info(
                "trace %s: pid %d's late %r report ignored: it is %s", trace.trace_id, record.host_pid,
                phase.value, process.phase.value,
            )  # fmt: skip
            return
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
        if phase.final and record.profiler == trace_holder(trace.kind, trace.trace_id):
            record.profiler = ""
        self._delivery.answered(record.host_pid, trace.kind, trace.trace_id, final=phase.final)
        self._traces.set_phase(trace, process, phase)
