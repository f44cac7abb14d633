"""A trace of processes whose npu-monitor runs: each monitor stopped for the trace, and started again
with the settings it had once its process's part in the trace is over. ``dyno nputrace
--pause-monitor`` asks for it (:meth:`MonitorPause.run`); an incident's auto-trace is one
(:mod:`.incidents.actions`): both run :meth:`MonitorPause.start`.

The two kinds exclude each other per process (the pipeline's rule), so the stop, the trace and the
resume are commands through the one pipeline, exactly as ``dyno`` would send them: the exclusion is
never copied here. A monitor is resumed whatever became of its process's trace — refused, failed,
cancelled, or not over after :data:`TRACE_WAIT_S` — so the process is never left with neither, unless
the daemon stops meanwhile (an incident keeps what to resume with for the next daemon). A monitor this
daemon did not start (it ran before the daemon did) is not paused: its settings are unknown here, and
the trace is refused there as without the flag.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Dict, Mapping, Optional, Protocol, Set, Tuple, TypeVar

from msmonitor_contract.kinds.npumonitor import NPUMONITOR
from msmonitor_contract.targets import Targets
from msmonitor_contract.vocabulary import MONITOR_HOLDER, MonitorState

from ..core import targeting
from ..core.model import CommandResult
from ..core.pipeline import CommandPipeline
from ..core.registry import ProcessRecord
from ..core.traces import Trace, TraceStore
from .npumonitor import NpuMonitor, NpuMonitorCommand
from .nputrace import NpuTrace, NpuTraceCommand

log = logging.getLogger("dynolog.trace")

TRACE_WAIT_S = 600.0  # a process that never reaches (or ends) its trace gets its monitor back after this
PAUSED = "monitor paused, resumes after the trace"  # a paused process's outcome row
_T = TypeVar("_T")


class PauseLog(Protocol):
    """What a paused trace tells its owner at each step (an incident's timeline, the daemon's log)."""

    def paused(self, stop: Optional[CommandResult], monitors: Mapping[int, NpuMonitorCommand]) -> None:
        """The monitors stopped, by host pid, with the start each resumes with; *stop*: the stop's
        answer, None when no targeted process had a monitor this daemon can pause."""

    def started(self, result: CommandResult, trace: Optional[Trace]) -> None:
        """The trace's answer; *trace* None when no process took it."""

    def ended(self, trace: Trace, host_pid: int, over: bool) -> None:
        """*host_pid*'s part in *trace* is over (*over* False: not after the wait), before its resume."""

    def resumed(self, host_pid: int, result: CommandResult) -> None:
        """The answer to *host_pid*'s resume."""


@dataclass
class MonitorPause:
    pipeline: CommandPipeline
    npumonitor: NpuMonitor
    nputrace: NpuTrace
    traces: TraceStore
    wait_s: float = TRACE_WAIT_S
    _tasks: Set[asyncio.Task[Any]] = field(default_factory=set)

    async def run(self, request: NpuTraceCommand) -> CommandResult:
        """``nputrace --pause-monitor`` from an edge: the answer once the trace is sent; each resume
        follows its process's trace, told to the daemon's log (a failed one also to the trace's record,
        which ``dyno trace ID`` shows). A client that gives up meanwhile (its deadline, Ctrl-C) cancels
        only its wait for the answer, never the resumes."""
        return await asyncio.shield(self._spawn(self._run(request)))

    async def _run(self, request: NpuTraceCommand) -> CommandResult:
        result, rest = await self.start(request, _TraceLog())
        self._spawn(rest)
        return result

    def _spawn(self, work: Awaitable[_T]) -> asyncio.Task[_T]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def start(
        self,
        request: NpuTraceCommand,
        told: PauseLog,
        known: Optional[Mapping[int, NpuMonitorCommand]] = None,
    ) -> Tuple[CommandResult, Awaitable[None]]:
        """Stop the running monitors of the processes *request* targets (those *known* says how to
        resume, by host pid; default: every start this daemon sent), then run *request*. Returns its
        answer and the rest, which the caller must await: it waits for each paused process's part in
        the trace to end and resumes its monitor (at once where the process did not take the trace)."""
        settings = dict(self.npumonitor.settings if known is None else known)  # a stop forgets them
        monitors = await self._stop(request.targets, settings, told)
        try:
            result = await self.pipeline.run_as_is(self.nputrace, request)
        except asyncio.CancelledError:
            raise
        except BaseException:
            await self._resume_after(None, monitors, told)
            raise
        trace = self.traces.get(result.trace_id) if result.effective else None
        for outcome in result.taken:
            if outcome.record.host_pid in monitors:
                outcome.detail = PAUSED
        told.started(result, trace)
        return result, self._resume_after(trace, monitors, told)

    async def over(self, trace: Trace, host_pid: int, told: PauseLog) -> None:
        """Until *host_pid*'s part in *trace* finished or failed, or the wait is spent; then told."""
        process = trace.processes[host_pid]
        over = await trace.changes.until(lambda: process.phase.final, self.wait_s)
        told.ended(trace, host_pid, over)

    async def resume_after(
        self, work: Awaitable[None], host_pid: int, monitor: NpuMonitorCommand, told: PauseLog
    ) -> None:
        """*work*, then *host_pid*'s monitor started with *monitor* whatever happened in it — unless the
        daemon is stopping (cancelled)."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except BaseException:
            await self._resume(host_pid, monitor, told)
            raise
        await self._resume(host_pid, monitor, told)

    async def _stop(
        self, targets: Targets, settings: Dict[int, NpuMonitorCommand], told: PauseLog
    ) -> Dict[int, NpuMonitorCommand]:
        running = [
            r.host_pid
            for r in targeting.select(self.pipeline.registry, targets)
            if _monitored(r) and r.host_pid in settings
        ]
        if not running:
            told.paused(None, {})
            return {}
        stop = NPUMONITOR.model(targets=Targets(pids=tuple(running)), stop=True)
        stopped = await self.pipeline.run(self.npumonitor, stop)
        pids = {o.record.host_pid for o in stopped.taken}
        monitors = {pid: settings[pid] for pid in running if pid in pids}
        told.paused(stopped, monitors)
        return monitors

    async def _resume_after(
        self, trace: Optional[Trace], monitors: Mapping[int, NpuMonitorCommand], told: PauseLog
    ) -> None:
        async def one(host_pid: int, monitor: NpuMonitorCommand) -> None:
            took = trace is not None and host_pid in trace.processes
            work = self.over(trace, host_pid, told) if took and trace is not None else _nothing()
            await self.resume_after(work, host_pid, monitor, told)

        await asyncio.gather(*(one(pid, monitor) for pid, monitor in monitors.items()))

    async def _resume(self, host_pid: int, monitor: NpuMonitorCommand, told: PauseLog) -> None:
        start = dataclasses.replace(monitor, targets=Targets.of_pid(host_pid))
        told.resumed(host_pid, await self.pipeline.run(self.npumonitor, start))


@dataclass
class _TraceLog:
    """An ``nputrace --pause-monitor``'s steps in the daemon's log; a failed resume also on the
    process's record in the trace."""

    trace: Optional[Trace] = None

    def paused(self, stop: Optional[CommandResult], monitors: Mapping[int, NpuMonitorCommand]) -> None:
        if monitors:
            log.info("nputrace: npu-monitor paused in process(es) %s", ", ".join(map(str, sorted(monitors))))

    def started(self, result: CommandResult, trace: Optional[Trace]) -> None:
        self.trace = trace

    def ended(self, trace: Trace, host_pid: int, over: bool) -> None:
        if not over:
            log.warning("trace %s: process %d not done after %g s", trace.trace_id, host_pid, TRACE_WAIT_S)

    def resumed(self, host_pid: int, result: CommandResult) -> None:
        named = f"trace {self.trace.trace_id}" if self.trace is not None else "the trace"
        if result.effective:
            log.info("process %d: npu-monitor resumed after %s", host_pid, named)
            return
        why = (
            f"npu-monitor not resumed after {named}: {result.message}; start it again with "
            "dyno npu-monitor --npu-monitor-start"
        )
        log.warning("process %d: %s", host_pid, why)
        process = self.trace.processes.get(host_pid) if self.trace is not None else None
        if self.trace is not None and process is not None:
            process.warnings.append(why)
            self.trace.changes.notify()


def _monitored(record: ProcessRecord) -> bool:
    """The monitor runs there: what the pipeline's exclusion refuses a trace for."""
    return record.monitor_state is MonitorState.RUNNING or record.profiler == MONITOR_HOLDER


async def _nothing() -> None:
    """A process that did not take the trace: nothing to wait for before its resume."""
