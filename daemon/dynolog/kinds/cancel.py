"""Cancelling a trace (``dyno trace ID --cancel``, operators only), so nothing a trace waits for can
lock a process out.

A process whose plugin runs the trace is sent the kind's stop (a window's stop, or ``TRACE_STOP``), as
every command is sent: pushed again at each heartbeat until it answers. The plugin drops a trace still
waiting for its start and stops one that records at its next step, writing what it recorded. A command
still in the outbox of a client that polls is taken back; one such a client took already (stock Kineto,
torch_npu's own profiler) cannot be stopped from here: the daemon stops following it, says so, and the
process may be sent the next trace.
"""

from __future__ import annotations

import logging

from msmonitor_contract.vocabulary import TracePhase

from ..core.delivery import Delivery
from ..core.registry import ProcessRecord, Registry
from ..core.traces import ProcessTrace, Trace, TraceStore

log = logging.getLogger("dynolog.trace")

CANCEL_WAIT_S = 5.0  # for the processes' answers, within dyno's 10 s call timeout


async def cancel(
    trace: Trace, stop_text: str, registry: Registry, traces: TraceStore, delivery: Delivery
) -> None:
    """Cancel *trace* in each process still on it; return once all answered, or after CANCEL_WAIT_S."""
    pending = [p for p in trace.processes.values() if not p.phase.final]
    log.info("cancelling %s %s in %d process(es)", trace.kind.value, trace.trace_id, len(pending))
    for process in pending:
        record = registry.get(process.host_pid)
        if record is None:
            continue  # it left: its trace fails with that reason as it is forgotten
        if record.host_pid not in trace.pulled and record.runs_itself(trace.kind):
            delivery.push(record, trace.kind, trace.trace_id, stop_text, final_only=True)
        else:
            _take_back(traces, trace, process, record)
    await trace.changes.until(lambda: trace.done, CANCEL_WAIT_S)


def _take_back(traces: TraceStore, trace: Trace, process: ProcessTrace, record: ProcessRecord) -> None:
    """A process whose client polls: the command leaves its outbox, or the daemon stops following it."""
    if process.phase is TracePhase.STAGED and record.outbox is not None:
        record.outbox = None  # one command waits for a poll at a time: this trace's
        process.error = "cancelled before the process's client took it"
    else:
        process.error = (
            "cancelled here; the process's own profiler took it already and runs it to its end "
            "(this daemon no longer follows it)"
        )
    traces.set_phase(trace, process, TracePhase.FAILED)
