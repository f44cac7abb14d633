"""``dyno nputrace``: trace chosen steps (or a time window) of processes, in msMonitor's keys."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from msmonitor_contract import configtext
from msmonitor_contract.vocabulary import (
    CommandKind,
    Reason,
)
from msmonitor_plugin.kinds import nputrace as nputrace_keys

from ..keyed import FieldKeys
from ..model import Targets
from ..registry import ClientKind, ProcessRecord
from .tracing import TracePolicy


@dataclass(frozen=True)
class NpuTraceCommand:
    """``dyno nputrace``: msMonitor's options, typed."""

    targets: Targets = field(default_factory=Targets)
    log_file: str = ""
    start_step: int = 0  # -1: the next step to begin
    iterations: int = 0  # > 0: step-based; 0: time-based (duration_ms)
    duration_ms: int = 0
    profile_start_time_ms: int = 0
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    analyse: bool = False
    async_mode: bool = False
    activities: Tuple[str, ...] = ()
    profiler_level: str = ""
    aic_metrics: str = ""
    l2_cache: bool = False
    op_attr: bool = False
    msprof_tx: bool = False
    mstx_domain_include: Tuple[str, ...] = ()
    mstx_domain_exclude: Tuple[str, ...] = ()
    data_simplification: bool = False
    export_type: str = ""
    gc_detect_threshold: Optional[float] = None
    host_sys: Tuple[str, ...] = ()
    sys_io: bool = False
    sys_interconnection: bool = False
    # A process whose npu-monitor runs pauses it for the trace (see dynolog.monitor_pause); no config
    # key: the daemon does it, the process is sent a plain trace.
    pause_monitor: bool = False


FIELDS = FieldKeys(nputrace_keys.KEYS, nputrace_keys.FIELD_KEYS)


class NpuTrace(TracePolicy[NpuTraceCommand]):
    kind = CommandKind.NPUTRACE
    pulled_by = ClientKind.MSMONITOR  # torch_npu and MindSpore trace with their own profiler
    rpc = "NpuTrace"
    command = NpuTraceCommand
    fields = FIELDS

    def label(self, request: NpuTraceCommand) -> str:
        return "nputrace"

    def pauses_monitor(self, request: NpuTraceCommand) -> bool:
        return request.pause_monitor

    def refuse(self, request: NpuTraceCommand, record: ProcessRecord) -> Optional[Reason]:
        if request.iterations > 0 and 0 <= request.start_step <= record.current_step:
            return Reason.START_STEP_PASSED
        if _mindspore_takes_it(record) and not _step_window(request):
            return Reason.FRAMEWORK_CANNOT
        return None

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

    def expected_output(self, request: NpuTraceCommand, record: ProcessRecord) -> str:
        log_file = request.log_file.rstrip("/")
        if _mindspore_takes_it(record):  # a closed window: rank{R}_start{S}_stop{E}
            stop = request.start_step + request.iterations - 1
            return f"{log_file}/rank{record.rank}_start{request.start_step}_stop{stop}/"
        host = record.hostname or self.hostname
        return f"{log_file}/{host}_{record.pid}_<timestamp>_<backend>/"

    def text(self, request: NpuTraceCommand) -> str:
        return nputrace_keys.render_command(request, request.gc_detect_threshold, request.targets.ranks)

    def from_text(self, text: str, targets: Targets) -> NpuTraceCommand:
        """msMonitor's dyno names ranks in the text (PROFILE_RANK_LIST, with PROFILE_IS_RANK)."""
        raw = configtext.read(nputrace_keys.KEYS, configtext.parse(text))
        ranks = (
            tuple(_numbers("PROFILE_RANK_LIST", raw["PROFILE_RANK_LIST"])) if raw["PROFILE_IS_RANK"] else ()
        )
        return FIELDS.command(
            NpuTraceCommand, text, dataclasses.replace(targets, ranks=tuple(ranks)), _typed_threshold
        )


def _typed_threshold(fields: Dict[str, Any]) -> Dict[str, Any]:
    """The GC threshold travels as optional text (``None`` when unset); the command holds a number."""
    if "gc_detect_threshold" in fields:
        fields["gc_detect_threshold"] = _numbers(
            "PROFILE_GC_DETECT_THRESHOLD", [fields["gc_detect_threshold"]], float
        )[0]
    return fields


def _numbers(key: str, texts: List[str], kind: Callable[[str], Any] = int) -> List[Any]:
    try:
        return [kind(t) for t in texts]
    except ValueError:
        raise configtext.ConfigTextError(f"{key}={','.join(texts)} is not a number") from None


def _mindspore_takes_it(record: ProcessRecord) -> bool:
    """MindSpore's own profiler will run the trace (through its monitor helper), not the plugin."""
    return record.backend == "mindspore" and not record.runs_itself(CommandKind.NPUTRACE)


def _step_window(request: NpuTraceCommand) -> bool:
    return request.iterations > 0 and request.start_step >= 0
