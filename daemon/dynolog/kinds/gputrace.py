"""``dyno gputrace``: dynolog's on-demand trace, in Kineto's keys (stock PyTorch and plugin processes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from msmonitor_plugin import configtext
from msmonitor_plugin.kinds import gputrace as gputrace_keys
from msmonitor_plugin.kinds.gputrace import kineto_output_file
from msmonitor_plugin.vocabulary import DEFAULT_START_ITERATION_ROUNDUP, CommandKind

from ..model import Targets
from ..registry import ClientKind, ProcessRecord
from .tracing import TracePolicy


@dataclass(frozen=True)
class GpuTraceCommand:
    """``dyno gputrace``: dynolog's options, as Kineto reads them."""

    targets: Targets = field(default_factory=Targets)
    log_file: str = ""
    duration_ms: int = 0
    iterations: int = 0  # > 0: iteration mode
    profile_start_time_ms: int = 0
    profile_start_iteration_roundup: int = 0
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False


class GpuTrace(TracePolicy[GpuTraceCommand]):
    kind = CommandKind.GPUTRACE
    pulled_by = ClientKind.KINETO  # stock PyTorch runs dynolog's gputrace
    rpc = "GpuTrace"
    command = GpuTraceCommand

    def label(self, request: GpuTraceCommand) -> str:
        return "gputrace"

    def expected_output(self, request: GpuTraceCommand, record: ProcessRecord) -> str:
        return kineto_output_file(request.log_file, record.pid)

    def text(self, request: GpuTraceCommand) -> str:
        r = request
        values = (
            {
                "PROFILE_START_ITERATION": 0,
                "PROFILE_START_ITERATION_ROUNDUP": (
                    r.profile_start_iteration_roundup or DEFAULT_START_ITERATION_ROUNDUP
                ),
                "ACTIVITIES_ITERATIONS": r.iterations,
            }
            if r.iterations > 0
            else {"PROFILE_START_TIME": r.profile_start_time_ms, "ACTIVITIES_DURATION_MSECS": r.duration_ms}
        )
        memory = (
            {
                "PROFILE_PROFILE_MEMORY": True,
                "PROFILE_MEMORY": True,
                "PROFILE_MEMORY_DURATION_MSECS": r.duration_ms,
            }
            if r.profile_memory
            else {}
        )
        return configtext.render(
            gputrace_keys.KEYS,
            {
                "ACTIVITIES_LOG_FILE": r.log_file,
                **values,
                "PROFILE_REPORT_INPUT_SHAPES": r.record_shapes,
                **memory,
                "PROFILE_WITH_STACK": r.with_stack,
                "PROFILE_WITH_FLOPS": r.with_flops,
                "PROFILE_WITH_MODULES": r.with_modules,
            },
        )
