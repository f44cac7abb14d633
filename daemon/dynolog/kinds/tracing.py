"""What the trace kinds (nputrace, gputrace) share: a trace id, staged per process, then delivered."""

from __future__ import annotations

import abc
import logging
import socket
from typing import Optional

from msmonitor_contract import configtext
from msmonitor_contract.kinds import tracing as trace_kinds
from msmonitor_contract.vocabulary import Reason

from ..core import seen_by
from ..core.delivery import Delivery
from ..core.model import CommandResult
from ..core.pipeline import Policy, Request
from ..core.registry import ProcessRecord
from ..core.traces import TraceStore

log = logging.getLogger("dynolog.trace")


class TracePolicy(Policy[Request]):
    traces = True

    def __init__(self, traces: TraceStore, delivery: Delivery) -> None:
        self._traces = traces
        self._delivery = delivery
        self.hostname = socket.gethostname()

    @abc.abstractmethod
    def text(self, request: Request) -> str:
        """The config text, as the process's client reads it."""

    @abc.abstractmethod
    def expected_output(self, request: Request, record: ProcessRecord) -> str: ...

    @abc.abstractmethod
    def output_folder(self, request: Request) -> str:
        """The folder the process writes the trace into (made where missing); "": its own default."""

    def refuse(self, request: Request, record: ProcessRecord) -> Optional[Reason]:
        """A folder the process could not write is refused now, not failed once the trace was due."""
        folder = self.output_folder(request)
        return Reason.OUTPUT_UNWRITABLE if folder and seen_by.unwritable(record.host_pid, folder) else None

    def explain(self, request: Request, reason: Reason, record: ProcessRecord) -> str:
        if reason is Reason.OUTPUT_UNWRITABLE:
            return seen_by.unwritable(record.host_pid, self.output_folder(request)) or reason.value
        return super().explain(request, reason, record)

    def stop_text(self) -> str:
        """The command that stops a trace of this kind (a cancel), sent with the trace's id."""
        return trace_kinds.stop_text()

    async def deliver(self, request: Request, result: CommandResult) -> None:
        trace = self._traces.new(self.kind)
        result.trace_id = trace.trace_id
        text = configtext.with_trace_id(self.text(request), trace.trace_id)
        for outcome in result.taken:
            record = outcome.record
            outcome.expected_output = self.expected_output(request, record)
            self._traces.stage(trace, record, outcome.expected_output)
            self._delivery.stage_or_push(record, self.kind, trace.trace_id, text)
        log.info("%s %s staged for %d process(es)", self.kind.value, trace.trace_id, len(result.taken))
