"""``dyno nputrace``: trace chosen steps (or a time window) of processes, in msMonitor's keys."""

from __future__ import annotations

from typing import Any, Optional

from msmonitor_contract.kinds.nputrace import NPUTRACE
from msmonitor_contract.vocabulary import (
    CommandKind,
    Reason,
)

from ..core.registry import ClientKind, ProcessRecord
from .tracing import TracePolicy

# The request as its declaration makes it (msmonitor_contract.kinds.nputrace): the proto's fields, by
# name, with the wire's defaults; pause_monitor has no config key: the daemon pauses the monitor itself
# (dynolog.kinds.pause) and sends the process a plain trace.
NpuTraceCommand = Any


class NpuTrace(TracePolicy[NpuTraceCommand]):
    kind = CommandKind.NPUTRACE
    pulled_by = ClientKind.MSMONITOR  # torch_npu and MindSpore trace with their own profiler
    declaration = NPUTRACE

    def label(self, request: NpuTraceCommand) -> str:
        return "nputrace"

    def pauses_monitor(self, request: NpuTraceCommand) -> bool:
        return request.pause_monitor

    def refuse(self, request: NpuTraceCommand, record: ProcessRecord) -> Optional[Reason]:
        if request.iterations > 0 and 0 <= request.start_step <= record.current_step:
            return Reason.START_STEP_PASSED
        if _mindspore_takes_it(record) and not _step_window(request):
            return Reason.FRAMEWORK_CANNOT
        return super().refuse(request, record)

    def explain(self, request: NpuTraceCommand, reason: Reason, record: ProcessRecord) -> str:
        if reason is Reason.START_STEP_PASSED:
            return f"start step {request.start_step} has passed: the process is at step {record.current_step}"
        if reason is Reason.NPU_MONITOR_RUNNING and request.pause_monitor:
            return (
                "its npu-monitor runs and was not paused: it did not stop, or this daemon did not start it "
                "and knows no settings to resume it with; stop it (dyno npu-monitor --npu-monitor-stop) first"
            )
        if reason is Reason.FRAMEWORK_CANNOT:
            return (
                "MindSpore's dynamic profiler traces step windows only, and ignores any other config "
                "without a word: give --start-step N (a step still to come) and --iterations"
            )
        return super().explain(request, reason, record)

    def output_folder(self, request: NpuTraceCommand) -> str:
        return str(request.log_file)

    def expected_output(self, request: NpuTraceCommand, record: ProcessRecord) -> str:
        log_file = request.log_file.rstrip("/")
        if _mindspore_takes_it(record):  # a closed window: rank{R}_start{S}_stop{E}
            stop = request.start_step + request.iterations - 1
            return f"{log_file}/rank{record.rank}_start{request.start_step}_stop{stop}/"
        host = record.hostname or self.hostname
        return f"{log_file}/{host}_{record.pid}_<timestamp>_<backend>/"

    def text(self, request: NpuTraceCommand) -> str:
        return NPUTRACE.render(request)


def _mindspore_takes_it(record: ProcessRecord) -> bool:
    """MindSpore's own profiler will run the trace (through its monitor helper), not the plugin."""
    return record.backend == "mindspore" and not record.runs_itself(CommandKind.NPUTRACE)


def _step_window(request: NpuTraceCommand) -> bool:
    return request.iterations > 0 and request.start_step >= 0
