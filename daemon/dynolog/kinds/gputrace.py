"""``dyno gputrace``: dynolog's on-demand trace, in Kineto's keys (stock PyTorch and plugin processes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from msmonitor_plugin import configtext
from msmonitor_plugin.kinds import gputrace as gputrace_keys
from msmonitor_plugin.kinds.gputrace import kineto_output_file
from msmonitor_plugin.vocabulary import DEFAULT_START_ITERATION_ROUNDUP, CommandKind

from ..keyed import FieldKeys
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


# The command's fields as dynolog's keys (time-based keys left out of an iteration trace and back).
FIELDS = FieldKeys(
    gputrace_keys.KEYS,
    (
        ("log_file", "ACTIVITIES_LOG_FILE"),
        ("profile_start_time_ms", "PROFILE_START_TIME"),
        ("duration_ms", "ACTIVITIES_DURATION_MSECS"),
        ("profile_start_iteration_roundup", "PROFILE_START_ITERATION_ROUNDUP"),
        ("iterations", "ACTIVITIES_ITERATIONS"),
        ("record_shapes", "PROFILE_REPORT_INPUT_SHAPES"),
        ("profile_memory", "PROFILE_PROFILE_MEMORY"),
        ("with_stack", "PROFILE_WITH_STACK"),
        ("with_flops", "PROFILE_WITH_FLOPS"),
        ("with_modules", "PROFILE_WITH_MODULES"),
    ),
)


class GpuTrace(TracePolicy[GpuTraceCommand]):
    kind = CommandKind.GPUTRACE
    pulled_by = ClientKind.KINETO  # stock PyTorch runs dynolog's gputrace
    rpc = "GpuTrace"
    command = GpuTraceCommand
    fields = FIELDS

    def label(self, request: GpuTraceCommand) -> str:
        return "gputrace"

    def expected_output(self, request: GpuTraceCommand, record: ProcessRecord) -> str:
        return kineto_output_file(request.log_file, record.pid)

    def text(self, request: GpuTraceCommand) -> str:
        r = request
        values = FIELDS.values(r)
        if r.iterations > 0:
            values["PROFILE_START_ITERATION"] = 0
            values["PROFILE_START_ITERATION_ROUNDUP"] = (
                r.profile_start_iteration_roundup or DEFAULT_START_ITERATION_ROUNDUP
            )
            unused = ["PROFILE_START_TIME", "ACTIVITIES_DURATION_MSECS"]
        else:
            unused = ["PROFILE_START_ITERATION_ROUNDUP", "ACTIVITIES_ITERATIONS"]
        if r.profile_memory:  # Kineto's memory profile: all three keys, as dynolog's dyno writes them
            values.update(PROFILE_MEMORY=True, PROFILE_MEMORY_DURATION_MSECS=r.duration_ms)
        else:
            unused.append("PROFILE_PROFILE_MEMORY")
        return configtext.render(gputrace_keys.KEYS, {k: v for k, v in values.items() if k not in unused})
