"""``dyno gputrace``: dynolog's on-demand trace, in Kineto's keys (stock PyTorch and plugin processes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from msmonitor_plugin.kinds import gputrace as gputrace_keys
from msmonitor_plugin.kinds.gputrace import kineto_output_file
from msmonitor_plugin.vocabulary import CommandKind

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


FIELDS = FieldKeys(gputrace_keys.KEYS, gputrace_keys.FIELD_KEYS)


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
        return gputrace_keys.render_command(request)
