"""The reply to a polling client's ``req``: the command staged in its outbox, once."""

from __future__ import annotations

from msmonitor_plugin.vocabulary import TracePhase

from ..registry import ProcessRecord
from ..traces import TraceStore


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
