"""What an incident does to its process: stop npu-monitor, trace the next steps, resume monitoring.

Every step is a command through the daemon's one pipeline, exactly as ``dyno`` would send it
(``npu-monitor --npu-monitor-stop``, ``nputrace --iterations N --analyse``, then the process's own
``npu-monitor --npu-monitor-start`` again), so the exclusion between the two kinds is the pipeline's,
never a second copy of it. Monitoring is resumed whatever happened in between, once the trace is done:
the process is never left with neither.

Rate limits: ``cooldown`` between two traces of one process, ``max`` traces per job in any 24 hours;
both read from the store, so that a restarted daemon keeps them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Optional

from ..kinds.npumonitor import AutoTraceRule, NpuMonitor, NpuMonitorCommand
from ..kinds.nputrace import NpuTrace, NpuTraceCommand
from ..model import CommandResult, Targets
from ..pipeline import CommandPipeline
from ..traces import Trace, TraceStore
from .incident import RATE_LIMITED, TRACING, Incident
from .store import DAY_S, IncidentStore

log = logging.getLogger("dynolog.incidents")

TRACE_WAIT_S = 600.0  # a trace of a few steps; a process that stops stepping is resumed after this
# A trace that ended while no daemon listened is reported by the process's events, which it sends once
# its hello is answered: moments later, seconds on a loaded node.
REPORT_AFTER_HELLO_S = 10.0


def rate_limit(store: IncidentStore, incident: Incident, rule: AutoTraceRule, now: float) -> Optional[str]:
    """Why *incident* may not be traced now, or None."""
    last = store.last_traced_at(incident.host_pid)
    if last is not None and now - last < rule.cooldown_s:
        return f"{RATE_LIMITED} (cooldown: this process was traced {now - last:.0f} s ago)"
    if store.traced_since(incident.job_id, now - DAY_S) >= rule.max_per_day:
        return f"{RATE_LIMITED} (max {rule.max_per_day}/day for job {incident.job_id})"
    return None


@dataclass
class AutoTracer:
    pipeline: CommandPipeline
    npumonitor: NpuMonitor
    nputrace: NpuTrace
    traces: TraceStore
    store: IncidentStore
    trace_dir: Path

    async def run(self, incident: Incident, monitor: NpuMonitorCommand) -> None:
        """Stop → trace → resume for *incident*'s process; *monitor*: the start to resume with."""
        targets = Targets.of_pid(incident.host_pid)
        stopped = await self.pipeline.run(self.npumonitor, NpuMonitorCommand(targets=targets, stop=True))
        if not stopped.effective:
            incident.traced = False
            return self._done(incident, f"not traced: npu-monitor stop: {stopped.message}")
        incident.resume = json.dumps(monitor.to_json())
        self._step(incident, "npu-monitor stopped")
        assert monitor.auto_trace is not None  # only a monitor with --auto-trace raises incidents
        await self._then_resume(
            incident, self._trace(incident, targets, monitor.auto_trace.iterations), "npu-monitor resumed"
        )

    async def recover(self, incident: Incident) -> None:
        """After a daemon restart that cut *incident*'s auto-trace short, its process is back: the trace
        the plugin went on with (adopted from the process's hello, or from the events that follow it if
        the trace ended while no daemon listened), then the resume."""
        await self._then_resume(
            incident, self._adopted(incident), "npu-monitor resumed after a daemon restart"
        )

    async def _adopted(self, incident: Incident) -> None:
        if incident.action != TRACING:  # the outcome was recorded before the restart: only the resume is left
            return
        if not incident.trace_id:
            return self._done(incident, "not traced: the daemon restarted before the trace began")
        # Adopted from the hello if the trace still runs; else from the events that follow it.
        trace = await self.traces.learnt(incident.trace_id, REPORT_AFTER_HELLO_S)
        if trace is None:
            why = f"the process did not report trace {incident.trace_id} after the daemon restarted"
            return self._done(incident, f"not traced: {why}")
        await self._finish(incident, trace)

    async def _then_resume(self, incident: Incident, work: Awaitable[None], what: str) -> None:
        """*work*, then the resume whatever happened in it: the process is never left with neither —
        unless the daemon is stopping (cancelled), when the next daemon resumes it from the store."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except BaseException:
            await self._resume(incident, what)
            raise
        await self._resume(incident, what)

    async def _resume(self, incident: Incident, what: str) -> None:
        monitor = _resumable(incident)
        incident.resume = ""
        if monitor is None:
            return self._step(incident, "not resumed: an older daemon recorded the monitor's settings")
        resumed = await self.pipeline.run(
            self.npumonitor, dataclasses.replace(monitor, targets=Targets.of_pid(incident.host_pid))
        )
        self._step(incident, what if resumed.effective else f"not resumed: {resumed.message}")

    async def _trace(self, incident: Incident, targets: Targets, iterations: int) -> None:
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        request = NpuTraceCommand(
            targets=targets,
            start_step=-1,
            iterations=iterations,
            analyse=True,
            activities=("CPU", "NPU"),
            log_file=str(self.trace_dir),
        )
        result = await self.pipeline.run(self.nputrace, request)
        trace = self.traces.get(result.trace_id) if result.effective else None
        if trace is None:
            incident.traced = False
            return self._done(incident, f"not traced: nputrace: {_why(result)}")
        incident.traced, incident.trace_id = True, trace.trace_id
        self._step(incident, f"nputrace {trace.trace_id}: {request.iterations} steps from the next one")
        await self._finish(incident, trace)

    async def _finish(self, incident: Incident, trace: Trace) -> None:
        """Waits for *trace*, and records its outcome and files."""
        await trace.changes.until(lambda: trace.done, TRACE_WAIT_S)
        process = trace.processes.get(incident.host_pid)
        if process is None or not process.phase.final:
            return self._done(incident, f"trace {trace.trace_id} not done after {TRACE_WAIT_S:g} s")
        incident.trace_files = list(process.files)
        steps = f"steps {process.start_step}-{process.stop_step - 1}"
        outcome = (
            f"traced ({steps}, {process.output})" if not process.error else f"trace failed: {process.error}"
        )
        self._done(incident, outcome)

    def _step(self, incident: Incident, what: str) -> None:
        incident.note(what)
        self.store.update(incident)

    def _done(self, incident: Incident, action: str) -> None:
        incident.action = action
        log.info("incident %d: %s", incident.id, action)
        self._step(incident, action)


def _resumable(incident: Incident) -> Optional[NpuMonitorCommand]:
    """The monitor's start kept in *incident*, or None where a daemon before this format kept it."""
    try:
        return NpuMonitorCommand.from_json(json.loads(incident.resume))
    except (ValueError, TypeError, AttributeError):
        return None


def _why(result: CommandResult) -> str:
    return result.message or "no process took it"
