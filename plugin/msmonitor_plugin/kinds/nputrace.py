"""``nputrace``: msMonitor's trace, in msMonitor's keys (reference/msmonitor.md §2.2), the same text
torch_npu and MindSpore parse themselves. Step-based traces carry the three iteration keys, time-based
ones the two time keys. torch_npu's profiler records it where the process has imported torch_npu, else
torch.profiler, into a folder of its own under ACTIVITIES_LOG_FILE."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional, Sequence

from msmonitor_contract import vocabulary as v
from msmonitor_contract.configtext import (
    BOOL,
    INT,
    LIST,
    OPTIONAL_TEXT,
    TEXT,
    ConfigTextError,
    FieldKeys,
    Key,
    Table,
    by_key,
    read,
    render,
)
from msmonitor_contract.vocabulary import CommandKind, timestamp

from .base import TorchOutput, TraceKind, TraceSpec, at_least, in_folder, recording_options, time_based

KEYS: Table = (
    Key("ACTIVITIES_LOG_FILE", TEXT),
    Key("PROFILE_START_ITERATION", INT, 0),
    Key("PROFILE_START_STEP", INT, -1),
    Key("ACTIVITIES_ITERATIONS", INT, 0),
    Key("PROFILE_START_TIME", INT, 0),
    Key("ACTIVITIES_DURATION_MSECS", INT, 0),
    Key("PROFILE_RECORD_SHAPES", BOOL, False),
    Key("PROFILE_PROFILE_MEMORY", BOOL, False),
    Key("PROFILE_WITH_STACK", BOOL, False),
    Key("PROFILE_WITH_FLOPS", BOOL, False),
    Key("PROFILE_WITH_MODULES", BOOL, False),
    Key("PROFILE_ACTIVITIES", LIST, v.split_list(v.DEFAULT_NPU_ACTIVITIES)),
    Key("PROFILE_ANALYSE", BOOL, False),
    Key("PROFILE_ASYNC_MODE", BOOL, False),
    Key("PROFILE_PROFILER_LEVEL", OPTIONAL_TEXT, v.DEFAULT_PROFILER_LEVEL),
    Key("PROFILE_AIC_METRICS", OPTIONAL_TEXT, v.DEFAULT_AIC_METRICS),
    Key("PROFILE_L2_CACHE", BOOL, False),
    Key("PROFILE_OP_ATTR", BOOL, False),
    Key("PROFILE_MSPROF_TX", BOOL, False),
    Key("PROFILE_GC_DETECT_THRESHOLD", OPTIONAL_TEXT),
    Key("PROFILE_DATA_SIMPLIFICATION", BOOL, True),
    Key("PROFILE_EXPORT_TYPE", OPTIONAL_TEXT, v.DEFAULT_TRACE_EXPORT),
    Key("PROFILE_HOST_SYS", LIST, []),
    Key("PROFILE_SYS_IO", BOOL, False),
    Key("PROFILE_SYS_INTERCONNECTION", BOOL, False),
    Key("PROFILE_MSTX_DOMAIN_INCLUDE", LIST, []),
    Key("PROFILE_MSTX_DOMAIN_EXCLUDE", LIST, []),
    Key("PROFILE_IS_RANK", BOOL, False),
    Key("PROFILE_RANK_LIST", LIST, []),
)

# The fields of a command (dyno's NpuTraceRequest, the daemon's command) that are keys as they are, by
# name: whoever writes the text (the daemon; dyno for msMonitor's C++ daemon) adds the keys it derives.
FIELD_KEYS: FieldKeys = (
    ("log_file", "ACTIVITIES_LOG_FILE"),
    ("start_step", "PROFILE_START_STEP"),
    ("iterations", "ACTIVITIES_ITERATIONS"),
    ("profile_start_time_ms", "PROFILE_START_TIME"),
    ("duration_ms", "ACTIVITIES_DURATION_MSECS"),
    ("record_shapes", "PROFILE_RECORD_SHAPES"),
    ("profile_memory", "PROFILE_PROFILE_MEMORY"),
    ("with_stack", "PROFILE_WITH_STACK"),
    ("with_flops", "PROFILE_WITH_FLOPS"),
    ("with_modules", "PROFILE_WITH_MODULES"),
    ("activities", "PROFILE_ACTIVITIES"),
    ("analyse", "PROFILE_ANALYSE"),
    ("async_mode", "PROFILE_ASYNC_MODE"),
    ("profiler_level", "PROFILE_PROFILER_LEVEL"),
    ("aic_metrics", "PROFILE_AIC_METRICS"),
    ("l2_cache", "PROFILE_L2_CACHE"),
    ("op_attr", "PROFILE_OP_ATTR"),
    ("msprof_tx", "PROFILE_MSPROF_TX"),
    ("gc_detect_threshold", "PROFILE_GC_DETECT_THRESHOLD"),
    ("data_simplification", "PROFILE_DATA_SIMPLIFICATION"),
    ("export_type", "PROFILE_EXPORT_TYPE"),
    ("host_sys", "PROFILE_HOST_SYS"),
    ("sys_io", "PROFILE_SYS_IO"),
    ("sys_interconnection", "PROFILE_SYS_INTERCONNECTION"),
    ("mstx_domain_include", "PROFILE_MSTX_DOMAIN_INCLUDE"),
    ("mstx_domain_exclude", "PROFILE_MSTX_DOMAIN_EXCLUDE"),
)


def render_command(command: Any, gc_detect_threshold: Optional[float], ranks: Sequence[int]) -> str:
    """An nputrace's text from a command with the FIELD_KEYS fields (the daemon's, or dyno's request to
    msMonitor's daemon), as msMonitor's dyno writes it: its defaults for the level, the AI Core metrics
    and the export, the ranks as PROFILE_IS_RANK and PROFILE_RANK_LIST, and a step trace's three keys or
    a time window's two. The GC threshold is given apart: a request's unset one reads as 0."""
    values = {
        **by_key(FIELD_KEYS, command),
        "PROFILE_PROFILER_LEVEL": command.profiler_level or v.DEFAULT_PROFILER_LEVEL,
        "PROFILE_AIC_METRICS": command.aic_metrics or v.DEFAULT_AIC_METRICS,
        "PROFILE_EXPORT_TYPE": command.export_type or v.DEFAULT_TRACE_EXPORT,
        "PROFILE_GC_DETECT_THRESHOLD": gc_detect_threshold,
        "PROFILE_IS_RANK": bool(ranks),
        "PROFILE_RANK_LIST": list(ranks),
    }
    if command.iterations > 0:
        values["PROFILE_START_ITERATION"] = 0
        unused = ("PROFILE_START_TIME", "ACTIVITIES_DURATION_MSECS")
    else:
        unused = ("PROFILE_START_STEP", "ACTIVITIES_ITERATIONS")
    return render(KEYS, {key: value for key, value in values.items() if key not in unused})


# The PROFILE_ keys the spec holds in fields of its own; every other one goes to torch_npu as text.
_COMMON_KEYS = {
    "PROFILE_START_STEP",
    "PROFILE_START_ITERATION",
    "PROFILE_START_TIME",
    "PROFILE_ACTIVITIES",
    "PROFILE_RECORD_SHAPES",
    "PROFILE_PROFILE_MEMORY",
    "PROFILE_WITH_STACK",
    "PROFILE_WITH_FLOPS",
    "PROFILE_WITH_MODULES",
    "PROFILE_ANALYSE",
}


def parse(trace_id: str, raw: Dict[str, str]) -> TraceSpec:
    values = read(KEYS, raw)
    check = at_least(values, raw)
    if not values["ACTIVITIES_LOG_FILE"]:
        raise ConfigTextError("ACTIVITIES_LOG_FILE is required")
    spec = TraceSpec(CommandKind.NPUTRACE, trace_id, values["ACTIVITIES_LOG_FILE"])
    spec.iterations = check("ACTIVITIES_ITERATIONS", 0)
    if spec.step_based:
        spec.start_step = check("PROFILE_START_STEP", -1)
    else:
        time_based(spec, check)
    spec.activities = values["PROFILE_ACTIVITIES"]
    recording_options(spec, values, shapes_key="PROFILE_RECORD_SHAPES")
    spec.analyse = values["PROFILE_ANALYSE"]
    spec.npu = {k: val for k, val in raw.items() if k.startswith("PROFILE_") and k not in _COMMON_KEYS}
    return spec


def _torch_output(spec: TraceSpec, host: str, pid: int) -> TorchOutput:
    """A folder per trace, named as torch_npu names its own (``_torch`` where it says ``_ascend_pt``)."""
    run = f"{host}_{pid}_{timestamp(int(time.time() * 1000))}_torch"
    return in_folder(os.path.join(spec.log_file, run), host, pid)


KIND = TraceKind(
    CommandKind.NPUTRACE,
    KEYS,
    parse,
    _torch_output,
    ascend_root=lambda spec: spec.log_file,
    framework_takes=True,
)
