"""``dyno npu-monitor``: start, change or stop each process's monitor, in msMonitor's keys.

Pushed processes answer at once with their monitor's state (and which kinds their backend cannot
record); the command waits for those answers, briefly, so ``dyno`` can show them. Clients that poll
(msMonitor's) take it at their next ``req``.
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any, Callable, Dict, List, Sequence

from msmonitor_contract import wire
from msmonitor_contract.kinds.npumonitor import NPUMONITOR
from msmonitor_contract.vocabulary import (
    MONITOR_HOLDER,
    CommandKind,
    MonitorState,
    Reason,
)

from ..core.changed import Changed
from ..core.delivery import Delivery
from ..core.model import CommandResult, Outcome
from ..core.pipeline import Policy
from ..core.registry import ProcessRecord
from ..core.traces import TraceStore
from ..edge.monitor_files import MonitorOutput, MonitorOutputs

log = logging.getLogger("dynolog.monitor")

ANSWER_WAIT_S = 2.0  # how long a command waits for pushed processes to say what they did
# How long a fetch of monitor files waits for the processes told to stop to say they did (their files
# are closed then): a torch monitor's stop may end a sampling window first.
STOP_WAIT_S = 10.0


# The request, and its --auto-trace, as their declarations make them (msmonitor_contract.kinds.
# npumonitor): the proto's fields. auto_trace None: no detection. An incident keeps a start as JSON
# (dataclasses.asdict) to resume the monitor with (NPUMONITOR.build).
NpuMonitorCommand = Any
AutoTraceRule = Any


class NpuMonitor(Policy[NpuMonitorCommand]):
    kind = CommandKind.NPUMONITOR
    declaration = NPUMONITOR

    def __init__(self, delivery: Delivery) -> None:
        self._delivery = delivery
        self._answers: Dict[str, Dict[int, wire.MonitorEvent]] = {}
        self._answered = Changed()  # each answer, and each process forgotten
        # Per host pid, the start its monitor runs with: what an auto-trace resumes it with afterwards.
        self.settings: Dict[int, NpuMonitorCommand] = {}
        # Every folder a start sent as --log-file, kept after the monitor and the process ended: what
        # `dyno npu-monitor --collect` fetches from.
        self.outputs = MonitorOutputs()

    @classmethod
    def for_node(cls, traces: TraceStore, delivery: Delivery) -> NpuMonitor:
        return cls(delivery)

    def label(self, request: NpuMonitorCommand) -> str:
        return "npu-monitor " + ("start" if request.start else "stop" if request.stop else "change")

    def text(self, request: NpuMonitorCommand) -> str:
        return NPUMONITOR.render(request)

    async def deliver(self, request: NpuMonitorCommand, result: CommandResult) -> None:
        command_id = secrets.token_hex(8)
        text = self.text(request)
        self._answers[command_id] = {}
        pushed: List[Outcome] = []
        for outcome in result.taken:
            if self._delivery.stage_or_push(outcome.record, self.kind, command_id, text):
                pushed.append(outcome)
            else:
                outcome.detail = "staged for the process's next poll"
        try:
            await self._answered.until(lambda: len(self._answers[command_id]) >= len(pushed), ANSWER_WAIT_S)
        finally:  # also when the client gives up meanwhile
            answers = self._answers.pop(command_id)
        for outcome in pushed:
            event = answers.get(outcome.record.host_pid)
            if event is None:
                outcome.detail = (
                    "sent; no answer yet: pushed again at each heartbeat until it answers "
                    "(see dyno npu-monitor --status)"
                )
            elif event.error:
                outcome.refuse(Reason.NOT_SUPPORTED, event.error)
            else:
                outcome.detail = _describe(event)
        self._remember(request, result)

    def _remember(self, request: NpuMonitorCommand, result: CommandResult) -> None:
        for outcome in result.taken:
            if request.start:
                self.settings[outcome.record.host_pid] = request
                if os.path.isabs(request.log_file):  # a relative one is the process's to resolve
                    self.outputs.remember(outcome.record, os.path.normpath(request.log_file))
            elif request.stop:
                self.settings.pop(outcome.record.host_pid, None)

    def forget(self, host_pid: int) -> None:
        self.settings.pop(host_pid, None)
        self._answered.notify()

    async def stops_answered(
        self, outputs: Sequence[MonitorOutput], writing: Callable[[MonitorOutput], bool]
    ) -> None:
        """Until no output is still *writing* after this daemon told its process to stop (its start
        forgotten), or STOP_WAIT_S: ``--npu-monitor-stop --collect`` fetches the files once the processes
        closed them, however long a stop takes beyond the command's own wait."""

        def answered() -> bool:
            return not any(writing(o) and o.host_pid not in self.settings for o in outputs)

        await self._answered.until(answered, STOP_WAIT_S)

    def answered(self, record: ProcessRecord, event: wire.MonitorEvent) -> None:
        """A process's ``mm.monitor``: its monitor's state after a command, or after it stopped."""
        running = event.state == MonitorState.RUNNING
        record.monitor_state = MonitorState.RUNNING if running else MonitorState.IDLE
        if not running and record.profiler == MONITOR_HOLDER:
            record.profiler = ""
        if event.reason:
            log.info("monitor of process %d stopped: %s", record.host_pid, event.reason)
        self._delivery.answered(record.host_pid, self.kind, event.command_id)
        answers = self._answers.get(event.command_id)
        if answers is not None:
            answers[record.host_pid] = event
        self._answered.notify()


def _describe(event: wire.MonitorEvent) -> str:
    parts = [f"monitor {event.state}" + (f" ({event.backend} backend)" if event.backend else "")]
    parts += [f"{kind} unavailable: {why}" for kind, why in event.unavailable.items()]
    parts += event.warnings
    if event.output:
        parts.append(f"records to {event.output}")
    return "; ".join(parts)
