"""``dyno gputrace``: dynolog's on-demand trace, in Kineto's keys (stock PyTorch and plugin processes)."""

from __future__ import annotations

import os
from typing import Any, Optional

from msmonitor_contract.kinds.gputrace import GPUTRACE, kineto_output_file
from msmonitor_contract.vocabulary import CommandKind, Reason

from ..core import seen_by
from ..core.registry import ClientKind, ProcessRecord
from .tracing import TracePolicy

# The request as its declaration makes it (msmonitor_contract.kinds.gputrace): the proto's fields.
GpuTraceCommand = Any


class GpuTrace(TracePolicy[GpuTraceCommand]):
    kind = CommandKind.GPUTRACE
    pulled_by = ClientKind.KINETO  # stock PyTorch runs dynolog's gputrace
    declaration = GPUTRACE

    def label(self, request: GpuTraceCommand) -> str:
        return "gputrace"

    def refuse(self, request: GpuTraceCommand, record: ProcessRecord) -> Optional[Reason]:
        """Stock Kineto writes into an existing folder only, and fails silently: the daemon, on the same
        node, looks at once (the plugin makes the folder itself, as for nputrace)."""
        if not record.runs_itself(self.kind) and seen_by.missing(
            record.host_pid, self.output_folder(request)
        ):
            return Reason.OUTPUT_MISSING
        return super().refuse(request, record)

    def explain(self, request: GpuTraceCommand, reason: Reason, record: ProcessRecord) -> str:
        if reason is Reason.OUTPUT_MISSING:
            folder = self.output_folder(request)
            return (
                f"the folder {folder} does not exist there, and stock Kineto does not create folders: "
                f"create it first (mkdir -p {folder}), or trace with the plugin (MSMONITOR_USE_DAEMON=1), "
                "which does"
            )
        return super().explain(request, reason, record)

    def output_folder(self, request: GpuTraceCommand) -> str:
        log_file = str(request.log_file)
        if not log_file:
            return ""  # Kineto's default file
        return os.path.dirname(log_file) or ("/" if log_file.startswith("/") else ".")

    def expected_output(self, request: GpuTraceCommand, record: ProcessRecord) -> str:
        return kineto_output_file(request.log_file, record.pid)

    def text(self, request: GpuTraceCommand) -> str:
        return GPUTRACE.render(request)
