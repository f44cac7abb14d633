"""What clients that poll share (stock Kineto, msMonitor's): a ``req`` registers the process, and its
reply is the command staged in the process's outbox, once."""

from __future__ import annotations

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import TracePhase, TraceState

from ...core.registry import ClientKind, ProcessRecord, Registry
from ...core.traces import TraceStore
from ..endpoint import Sender


def register(
    registry: Registry, sender: Sender, request: wire.KinetoRequest, kind: ClientKind
) -> ProcessRecord:
    """A ``req``: from stock Kineto, or from an msMonitor client (*kind* says which). Its pids after the
    first (Kineto's ancestors) are not used: the registry reads the ancestors from /proc."""
    record = registry.touch(sender, request.pids[0], kind)
    if ClientKind.PLUGIN not in record.clients:  # the plugin's registration is richer
        record.job_id = request.job_id
        if record.framework_trace is TraceState.UNINITIALIZED:
            record.framework_trace = TraceState.IDLE
    return record


def take(traces: TraceStore, record: ProcessRecord) -> bytes:
    """Hand the process its staged command (a trace's or an npu-monitor's); a trace's is now delivered."""
    text, record.outbox = record.outbox, None
    if text is None:
        return b""
    trace = traces.active(record.host_pid)
    if trace is not None and trace.processes[record.host_pid].phase == TracePhase.STAGED:
        trace.pulled.add(record.host_pid)
        traces.set_phase(trace, trace.processes[record.host_pid], TracePhase.DELIVERED)
    return (text + "\n").encode()
