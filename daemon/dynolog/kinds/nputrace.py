"""``dyno nputrace``: trace chosen steps (or a time window) of processes, in msMonitor's keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

from msmonitor_plugin import configtext
from msmonitor_plugin.kinds import nputrace as nputrace_keys
from msmonitor_plugin.vocabulary import (
    DEFAULT_AIC_METRICS,
    DEFAULT_PROFILER_LEVEL,
    DEFAULT_TRACE_EXPORT,
    CommandKind,
    Reason,
)

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


class NpuTrace(TracePolicy[NpuTraceCommand]):
    kind = CommandKind.NPUTRACE
    pulled_by = ClientKind.MSMONITOR  # torch_npu and MindSpore trace with their own profiler
    rpc = "NpuTrace"
    command = NpuTraceCommand

    def label(self, request: NpuTraceCommand) -> str:
        return "nputrace"

    def refuse(self, request: NpuTraceCommand, record: ProcessRecord) -> Optional[Reason]:
        if request.iterations > 0 and 0 <= request.start_step <= record.current_step:
            return Reason.START_STEP_PASSED
        if _mindspore_takes_it(record) and not _step_window(request):
            return Reason.FRAMEWORK_CANNOT
        return None

    def explain(self, reason: Reason, record: ProcessRecord) -> str:
        if reason is Reason.FRAMEWORK_CANNOT:
            return (
                "MindSpore's dynamic profiler traces step windows only, and ignores any other config "
                "without a word: give --start-step N (a step still to come) and --iterations"
            )
        return super().explain(reason, record)

    def expected_output(self, request: NpuTraceCommand, record: ProcessRecord) -> str:
        log_file = request.log_file.rstrip("/")
        if _mindspore_takes_it(record):  # a closed window: rank{R}_start{S}_stop{E}
            stop = request.start_step + request.iterations - 1
            return f"{log_file}/rank{record.rank}_start{request.start_step}_stop{stop}/"
        host = record.hostname or self.hostname
        return f"{log_file}/{host}_{record.pid}_<timestamp>_<backend>/"

    def text(self, request: NpuTraceCommand) -> str:
        r = request
        when = (
            {
                "PROFILE_START_ITERATION": 0,
                "PROFILE_START_STEP": r.start_step,
                "ACTIVITIES_ITERATIONS": r.iterations,
            }
            if r.iterations > 0
            else {"PROFILE_START_TIME": r.profile_start_time_ms, "ACTIVITIES_DURATION_MSECS": r.duration_ms}
        )
        return configtext.render(
            nputrace_keys.KEYS,
            {
                "ACTIVITIES_LOG_FILE": r.log_file,
                **when,
                "PROFILE_RECORD_SHAPES": r.record_shapes,
                "PROFILE_PROFILE_MEMORY": r.profile_memory,
                "PROFILE_WITH_STACK": r.with_stack,
                "PROFILE_WITH_FLOPS": r.with_flops,
                "PROFILE_WITH_MODULES": r.with_modules,
                "PROFILE_ACTIVITIES": list(r.activities),
                "PROFILE_ANALYSE": r.analyse,
                "PROFILE_ASYNC_MODE": r.async_mode,
                "PROFILE_PROFILER_LEVEL": r.profiler_level or DEFAULT_PROFILER_LEVEL,
                "PROFILE_AIC_METRICS": r.aic_metrics or DEFAULT_AIC_METRICS,
                "PROFILE_L2_CACHE": r.l2_cache,
                "PROFILE_OP_ATTR": r.op_attr,
                "PROFILE_MSPROF_TX": r.msprof_tx,
                "PROFILE_GC_DETECT_THRESHOLD": r.gc_detect_threshold,
                "PROFILE_DATA_SIMPLIFICATION": r.data_simplification,
                "PROFILE_EXPORT_TYPE": r.export_type or DEFAULT_TRACE_EXPORT,
                "PROFILE_HOST_SYS": list(r.host_sys),
                "PROFILE_SYS_IO": r.sys_io,
                "PROFILE_SYS_INTERCONNECTION": r.sys_interconnection,
                "PROFILE_MSTX_DOMAIN_INCLUDE": list(r.mstx_domain_include),
                "PROFILE_MSTX_DOMAIN_EXCLUDE": list(r.mstx_domain_exclude),
                "PROFILE_IS_RANK": bool(r.targets.ranks),
                "PROFILE_RANK_LIST": list(r.targets.ranks),
            },
        )


def _mindspore_takes_it(record: ProcessRecord) -> bool:
    """MindSpore's own profiler will run the trace (through its monitor helper), not the plugin."""
    return record.backend == "mindspore" and not record.runs_itself(CommandKind.NPUTRACE)


def _step_window(request: NpuTraceCommand) -> bool:
    return request.iterations > 0 and request.start_step >= 0
