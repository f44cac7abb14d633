"""``nputrace``: msMonitor's trace, declared once. Its keys are msMonitor's (reference/msmonitor.md §2.2),
in the order its ``dyno`` writes them, the same text torch_npu and MindSpore parse themselves: a
step-based trace carries the three iteration keys, a time-based one the two time keys; the ranks travel
in the text (PROFILE_IS_RANK, PROFILE_RANK_LIST)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from .. import rules
from .. import vocabulary as v
from ..configtext import BOOL as BOOL_KEY
from ..configtext import INT as INT_KEY
from ..configtext import LIST, OPTIONAL_TEXT, Key
from ..rules import FieldError
from ..schema import Field, KeyOf, Kind, Message, Usage, numbers_of
from ..targets import TARGETS
from ..values import BOOL, FLOAT, INT, NAMES, TEXT, TRUE_FALSE
from .tracing import (
    MAX_STEP,
    NPU_ACTIVITIES,
    PROFILE_MEMORY,
    RECORD_SHAPES,
    WITH_MODULES,
    WITH_STACK,
    switch,
    trigger,
)

PROFILER_LEVELS = ("Level_none", "Level0", "Level1", "Level2")
AIC_METRICS = (
    "AiCoreNone",
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "ResourceConflictRatio",
    "MemoryUB",
    "L2Cache",
    "MemoryAccess",
)
EXPORT_TYPES = ("Text", "Db")
HOST_SYS = ("cpu", "mem", "disk", "network", "osrt")
# Keys no field holds: what the text derives from the fields and the targets.
START_ITERATION = Key("PROFILE_START_ITERATION", INT_KEY, 0)
IS_RANK = Key("PROFILE_IS_RANK", BOOL_KEY, False)
RANK_LIST = Key("PROFILE_RANK_LIST", LIST, [])
_STEP_KEYS = ("PROFILE_START_STEP", "ACTIVITIES_ITERATIONS")
_TIME_KEYS = ("PROFILE_START_TIME", "ACTIVITIES_DURATION_MSECS")


def _optional(name: str, default: Any = "") -> KeyOf:
    """A key msMonitor writes as ``None`` when empty, and fills with its default when not given."""
    return KeyOf(name, default=default, codec=OPTIONAL_TEXT, empty_is_default=bool(default))


def _async_needs_analyse(request: Any) -> List[FieldError]:
    if request.async_mode and not request.analyse:
        return [FieldError("async_mode", "needs --analyse (it runs the analysis in a subprocess)")]
    return []


def _shape(request: Any, values: Dict[str, Any]) -> Dict[str, Any]:
    """As msMonitor's dyno writes it: the ranks as PROFILE_IS_RANK and PROFILE_RANK_LIST, and a step
    trace's three keys or a time window's two."""
    ranks = list(request.targets.ranks)
    values.update({IS_RANK.name: bool(ranks), RANK_LIST.name: ranks})
    if request.iterations > 0:
        values[START_ITERATION.name] = 0
        unused = _TIME_KEYS
    else:
        unused = _STEP_KEYS
    return {key: value for key, value in values.items() if key not in unused}


def _unshape(raw: Mapping[str, str], fields: Dict[str, Any]) -> Dict[str, Any]:
    """msMonitor's dyno names ranks in the text (PROFILE_RANK_LIST, with PROFILE_IS_RANK)."""
    from .. import configtext

    said = configtext.read((IS_RANK, RANK_LIST), raw)
    ranks = numbers_of(said[RANK_LIST.name], RANK_LIST.name) if said[IS_RANK.name] else ()
    fields["targets"] = TARGETS.build({**_as_dict(fields["targets"]), "ranks": ranks})
    return fields


def _as_dict(targets: Any) -> Dict[str, Any]:
    return {f.name: getattr(targets, f.name) for f in TARGETS.fields}


NPUTRACE = Kind(
    v.CommandKind.NPUTRACE,
    "NpuTrace",
    Message(
        "NpuTraceRequest",
        (
            Field("targets", TARGETS),
            Field(
                "log_file",
                TEXT,
                "output directory on the traced node (absolute)",
                key="ACTIVITIES_LOG_FILE",
                check=rules.output_path,
                required=True,
            ),
            START_ITERATION,
            Field(
                "start_step",
                INT,
                "first step to record; -1: the next step to begin",
                default=-1,
                key="PROFILE_START_STEP",
                check=rules.within(-1, MAX_STEP, f"-1 (the next step) or a step number in 0..{MAX_STEP}"),
            ),
            Field(
                "iterations",
                INT,
                "steps to record; without it the trace is time-based (--duration-ms)",
                default=0,
                key="ACTIVITIES_ITERATIONS",
            ),
            Field(
                "profile_start_time_ms",
                INT,
                "epoch ms to start a time-based trace (same instant on many hosts)",
                default=0,
                key="PROFILE_START_TIME",
                flag="--profile-start-time",
            ),
            Field(
                "duration_ms",
                INT,
                "length of a time-based trace",
                default=v.DEFAULT_DURATION_MS,
                key=KeyOf("ACTIVITIES_DURATION_MSECS", default=0),
            ),
            RECORD_SHAPES,
            PROFILE_MEMORY,
            WITH_STACK,
            switch("with_flops", "PROFILE_WITH_FLOPS", "operator FLOPs"),
            WITH_MODULES,
            NPU_ACTIVITIES,
            switch("analyse", "PROFILE_ANALYSE", "also write a summary: top operators, step times"),
            switch("async_mode", "PROFILE_ASYNC_MODE", "analyse in a subprocess (needs --analyse)"),
            Field(
                "profiler_level",
                TEXT,
                ", ".join(PROFILER_LEVELS),
                default=v.DEFAULT_PROFILER_LEVEL,
                key=_optional("PROFILE_PROFILER_LEVEL", v.DEFAULT_PROFILER_LEVEL),
                check=rules.one_of(PROFILER_LEVELS),
            ),
            Field(
                "aic_metrics",
                TEXT,
                "AI Core metrics (Ascend)",
                default=v.DEFAULT_AIC_METRICS,
                key=_optional("PROFILE_AIC_METRICS", v.DEFAULT_AIC_METRICS),
                check=rules.one_of(AIC_METRICS),
            ),
            switch("l2_cache", "PROFILE_L2_CACHE", "L2 cache data (Ascend)"),
            switch("op_attr", "PROFILE_OP_ATTR", "operator attributes (Ascend)"),
            switch("msprof_tx", "PROFILE_MSPROF_TX", "mstx markers (Ascend)"),
            Field(
                "gc_detect_threshold",
                FLOAT,
                "ms; record GC above",
                key=_optional("PROFILE_GC_DETECT_THRESHOLD"),
                check=rules.finite(0, "finite, >= 0 ms"),
                optional=True,
            ),
            Field(
                "data_simplification",
                TRUE_FALSE,
                "true or false (Ascend)",
                default="true",
                key="PROFILE_DATA_SIMPLIFICATION",
            ),
            Field(
                "export_type",
                TEXT,
                "Text or Db (Ascend)",
                default=v.DEFAULT_TRACE_EXPORT,
                key=_optional("PROFILE_EXPORT_TYPE", v.DEFAULT_TRACE_EXPORT),
                check=rules.one_of(EXPORT_TYPES),
            ),
            Field(
                "host_sys",
                NAMES,
                "None or some of cpu,mem,disk,network,osrt",
                default="None",
                key="PROFILE_HOST_SYS",
                check=rules.some_of(HOST_SYS),
            ),
            switch("sys_io", "PROFILE_SYS_IO", "NIC / RoCE data (Ascend)"),
            switch("sys_interconnection", "PROFILE_SYS_INTERCONNECTION", "HCCS / PCIe data (Ascend)"),
            Field(
                "mstx_domain_include",
                NAMES,
                "mstx domains to keep",
                key="PROFILE_MSTX_DOMAIN_INCLUDE",
                check=rules.names,
            ),
            Field(
                "mstx_domain_exclude",
                NAMES,
                "mstx domains to drop",
                key="PROFILE_MSTX_DOMAIN_EXCLUDE",
                check=rules.names,
            ),
            IS_RANK,
            RANK_LIST,
            # No key: the daemon pauses a running npu-monitor itself (dynolog.kinds.pause), and sends the
            # process a plain trace.
            Field(
                "pause_monitor",
                BOOL,
                "a monitored process pauses its npu-monitor for the trace and resumes it with its own "
                "settings after",
            ),
        ),
        checks=(trigger, _async_needs_analyse),
    ),
    Usage(legacy=(v.MSMONITOR_DAEMON,), shape=_shape, unshape=_unshape),
)
