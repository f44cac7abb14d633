"""``dyno gputrace``: dynolog's on-demand trace, in Kineto's keys (stock PyTorch and plugin processes)."""

from __future__ import annotations

import os
from typing import Any, Optional

from msmonitor_contract.kinds.gputrace import GPUTRACE, kineto_output_file
from msmonitor_contract.vocabulary import CommandKind, Reason

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
        if record.runs_itself(self.kind) or not _missing(record.host_pid, _folder(request)):
            return None
        return Reason.OUTPUT_MISSING

    def explain(self, request: GpuTraceCommand, reason: Reason, record: ProcessRecord) -> str:
        if reason is Reason.OUTPUT_MISSING:
            folder = _folder(request)
            return (
                f"the folder {folder} does not exist there, and stock Kineto does not create folders: "
                f"create it first (mkdir -p {folder}), or trace with the plugin (MSMONITOR_USE_DAEMON=1), "
                "which does"
            )
        return super().explain(request, reason, record)

    def expected_output(self, request: GpuTraceCommand, record: ProcessRecord) -> str:
        return kineto_output_file(request.log_file, record.pid)

    def text(self, request: GpuTraceCommand) -> str:
        return GPUTRACE.render(request)


def _folder(request: GpuTraceCommand) -> str:
    return os.path.dirname(request.log_file) or "/"


def _missing(host_pid: int, folder: str) -> bool:
    """Whether *folder* is missing as the process sees it: through its root in /proc (a container's
    mounts are its own). Where the daemon may not look (another user's process, no /proc), it is not
    called missing: Kineto's silence then fails the trace as before."""
    root = f"/proc/{host_pid}/root"
    try:
        os.stat(root)
    except OSError:
        return False
    try:
        os.stat(root + folder)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False
