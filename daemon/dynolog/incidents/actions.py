"""What an incident does to its process: stop npu-monitor, trace the next steps, resume monitoring.

That is ``nputrace --pause-monitor`` for one process: :class:`~dynolog.kinds.pause.MonitorPause`
runs it for both (every step a command through the daemon's one pipeline, the monitor resumed with the
process's own settings whatever happened to the trace). Here its steps go on the incident's timeline,
kept in the store at each one, so that a restarted daemon finishes an auto-trace it cut short.

Rate limits: ``cooldown`` between two traces of one process, ``max`` traces per job in any 24 hours;
both read from the store, so that a restarted daemon keeps them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from msmonitor_contract.kinds.npumonitor import NPUMONITOR
from msmonitor_contract.kinds.nputrace import NPUTRACE
from msmonitor_contract.targets import Targets

from ..core.model import CommandResult
from ..core.pipeline import CommandPipeline
from ..core.traces import Trace, TraceStore
from ..kinds.npumonitor import AutoTraceRule, NpuMonitor, NpuMonitorCommand
from ..kinds.nputrace import NpuTrace
from ..kinds.pause import TRACE_WAIT_S, MonitorPause
from .incident import RATE_LIMITED, TRACING, Incident
from .store import DAY_S, IncidentStore

log = logging.getLogger("dynolog.incidents")

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
    _pause: MonitorPause = field(init=False)

    def __post_init__(self) -> None:
        self._pause = MonitorPause(self.pipeline, self.npumonitor, self.nputrace, self.traces, TRACE_WAIT_S)

    async def run(self, incident: Incident, monitor: NpuMonitorCommand) -> None:
        """Stop → trace → resume for *incident*'s process; *monitor*: the start to resume with."""
        assert monitor.auto_trace is not None  # only a monitor with --auto-trace raises incidents
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        request = NPUTRACE.model(
            targets=Targets.of_pid(incident.host_pid),
            start_step=-1,
            iterations=monitor.auto_trace.iterations,
            analyse=True,
            activities=("CPU", "NPU"),
            log_file=str(self.trace_dir),
            pause_monitor=True,
        )
        timeline = _Timeline(self.store, incident, request.iterations)
        _, rest = await self._pause.start(request, timeline, {incident.host_pid: monitor})
        await rest

    async def recover(self, incident: Incident) -> None:
        """After a daemon restart that cut *incident*'s auto-trace short, its process is back: the trace
        the plugin went on with (adopted from the process's hello, or from the events that follow it if
        the trace ended while no daemon listened), then the resume."""
        timeline = _Timeline(self.store, incident, resumed_as="npu-monitor resumed after a daemon restart")
        monitor = _resumable(incident)
        if monitor is None:
            await self._adopted(incident, timeline)
            incident.resume = ""
            return timeline.step("not resumed: an older daemon recorded the monitor's settings")
        await self._pause.resume_after(
            self._adopted(incident, timeline), incident.host_pid, monitor, timeline
        )

    async def _adopted(self, incident: Incident, timeline: _Timeline) -> None:
        if incident.action != TRACING:  # the outcome was recorded before the restart: only the resume is left
            return
        if not incident.trace_id:
            return timeline.done("not traced: the daemon restarted before the trace began")
        # Adopted from the hello if the trace still runs; else from the events that follow it.
        trace = await self.traces.learnt(incident.trace_id, REPORT_AFTER_HELLO_S)
        if trace is None or incident.host_pid not in trace.processes:
            why = f"the process did not report trace {incident.trace_id} after the daemon restarted"
            return timeline.done(f"not traced: {why}")
        await self._pause.over(trace, incident.host_pid, timeline)


@dataclass
class _Timeline:
    """An auto-trace's steps (a :class:`~dynolog.kinds.pause.PauseLog`) on its incident's timeline."""

    store: IncidentStore
    incident: Incident
    iterations: int = 0
    resumed_as: str = "npu-monitor resumed"

    def paused(self, stop: Optional[CommandResult], monitors: Mapping[int, NpuMonitorCommand]) -> None:
        monitor = monitors.get(self.incident.host_pid)
        if monitor is not None:
            self.incident.resume = json.dumps(dataclasses.asdict(monitor))
            self.step("npu-monitor stopped")
        elif stop is not None:
            self.step(f"npu-monitor did not stop: {_why(stop)}")

    def started(self, result: CommandResult, trace: Optional[Trace]) -> None:
        if trace is None:
            self.incident.traced = False
            return self.done(f"not traced: nputrace: {_why(result)}")
        self.incident.traced, self.incident.trace_id = True, trace.trace_id
        self.step(f"nputrace {trace.trace_id}: {self.iterations} steps from the next one")

    def ended(self, trace: Trace, host_pid: int, over: bool) -> None:
        process = trace.processes[host_pid]
        if not over:
            return self.done(f"trace {trace.trace_id} not done after {TRACE_WAIT_S:g} s")
        self.incident.trace_files = list(process.files)
        steps = f"steps {process.start_step}-{process.stop_step - 1}"
        self.done(
            f"traced ({steps}, {process.output})" if not process.error else f"trace failed: {process.error}"
        )

    def resumed(self, host_pid: int, result: CommandResult) -> None:
        self.incident.resume = ""
        self.step(self.resumed_as if result.effective else f"not resumed: {result.message}")

    def step(self, what: str) -> None:
        self.incident.note(what)
        self.store.update(self.incident)

    def done(self, action: str) -> None:
        self.incident.action = action
        log.info("incident %d: %s", self.incident.id, action)
        self.step(action)


def _resumable(incident: Incident) -> Optional[NpuMonitorCommand]:
    """The monitor's start kept in *incident*, or None where a daemon before this format kept it."""
    try:
        return NPUMONITOR.build(json.loads(incident.resume))
    except (ValueError, TypeError, AttributeError):
        return None


def _why(result: CommandResult) -> str:
    return result.message or "no process took it"
