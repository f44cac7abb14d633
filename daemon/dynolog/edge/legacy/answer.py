"""The replies, shaped so both CLIs parse them: the stock daemon's fields (its ``dyno gputrace``
unwraps ``processesMatched``, so every trace answer carries it) with msMonitor's ``commandStatus``, and
what only this daemon knows (the trace id, each process's outcome, the reason) beside them."""

from __future__ import annotations

from typing import Any, Dict, List

from dynoproto import legacy
from msmonitor_contract.vocabulary import Reason

from ...core.model import CommandResult, MsMonitorStatus
from ...core.traces import Trace

_BUSY = (Reason.TRACE_BUSY, Reason.NPU_MONITOR_RUNNING, Reason.NPU_TRACE_RUNNING)


def status(summary: MsMonitorStatus) -> Dict[str, Any]:
    """The stock ``{"status":1}`` and msMonitor's step and states, in one answer."""
    fields: Dict[str, Any] = {
        "status": 1,
        "current_step": summary.current_step,
        "npumonitor": summary.npumonitor,
        "nputrace": summary.nputrace,
    }
    if summary.start_step >= 0:  # msMonitor adds the window while a trace is Ready or Running
        fields.update(start_step=summary.start_step, stop_step=summary.stop_step)
    return fields


def version(text: str) -> Dict[str, Any]:
    return {"version": text}


def command(result: CommandResult) -> Dict[str, Any]:
    """Processes as they know their pids (a stock dyno names each one's file by it)."""
    taken = [o.record.pid for o in result.taken]
    fields = refused(result.message) if not result.effective else {}
    fields.update(
        {
            legacy.COMMAND_STATUS: legacy.EFFECTIVE if result.effective else legacy.INEFFECTIVE,
            legacy.MATCHED: [o.record.pid for o in result.outcomes],
            legacy.ACTIVITY_TRIGGERED: taken,
            legacy.ACTIVITY_BUSY: sum(o.reason in _BUSY for o in result.outcomes),
            legacy.EVENT_TRIGGERED: [],
            legacy.EVENT_BUSY: 0,
            "message": result.message,
            "outcomes": _outcomes(result),
        }
    )
    if result.trace_id:
        fields["traceId"] = result.trace_id
    return fields


def cancelled(trace: Trace) -> Dict[str, Any]:
    """A cancel's answer: the trace as it then stands, each process by the pid it knows."""
    return {
        "traceId": trace.trace_id,
        "done": trace.done,
        "processes": [
            {"pid": p.pid, "phase": p.phase.name.lower(), **({"error": p.error} if p.error else {})}
            for p in trace.processes.values()
        ],
    }


def refused(why: str) -> Dict[str, Any]:
    """A command nothing ran: ineffective, no process matched (so a stock dyno prints that, rather
    than panicking on a missing field), and why in words."""
    return {
        legacy.COMMAND_STATUS: legacy.INEFFECTIVE,
        legacy.MATCHED: [],
        legacy.ACTIVITY_TRIGGERED: [],
        legacy.ACTIVITY_BUSY: 0,
        legacy.EVENT_TRIGGERED: [],
        legacy.EVENT_BUSY: 0,
        "status": f"failed: {why}",
        "message": why,
    }


def _outcomes(result: CommandResult) -> List[Dict[str, Any]]:
    return [
        {
            "pid": o.record.pid,
            "rank": o.record.rank,
            "status": "triggered" if o.triggered else (o.reason.name.lower() if o.reason else ""),
            **({"detail": o.detail} if o.detail else {}),
            **({"output": o.expected_output} if o.expected_output else {}),
        }
        for o in result.outcomes
    ]
