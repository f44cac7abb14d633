"""The config text each command stages for a process, in the keys and order its consumer expects.

nputrace follows msMonitor's ``dyno`` exactly (reference/msmonitor.md §2.2) so torch_npu and MindSpore
read it unchanged; gputrace follows dynolog's ``dyno`` (reference/dynolog.md §4.1) for stock Kineto.
"""

from __future__ import annotations

from typing import List, Tuple

from dynoproto import dynolog_pb2 as pb
from msmonitor_plugin.trace.spec import kineto_output_file

__all__ = ["gpu_trace", "kineto_output_file", "npu_monitor", "npu_trace", "with_trace_id"]

Lines = List[Tuple[str, object]]


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or value == "" or value == []:
        return "None"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def render(lines: Lines) -> str:
    return "\n".join(f"{key}={_value(value)}" for key, value in lines)


def with_trace_id(text: str, trace_id: str) -> str:
    return f"{text}\nREQUEST_TRACE_ID={trace_id}"


def npu_trace(request: pb.NpuTraceRequest) -> str:
    lines: Lines = [("ACTIVITIES_LOG_FILE", request.log_file)]
    if request.iterations > 0:
        lines += [
            ("PROFILE_START_ITERATION", 0),
            ("PROFILE_START_STEP", request.start_step),
            ("ACTIVITIES_ITERATIONS", request.iterations),
        ]
    else:
        lines += [
            ("PROFILE_START_TIME", request.profile_start_time_ms),
            ("ACTIVITIES_DURATION_MSECS", request.duration_ms),
        ]
    lines += [
        ("PROFILE_RECORD_SHAPES", request.record_shapes),
        ("PROFILE_PROFILE_MEMORY", request.profile_memory),
        ("PROFILE_WITH_STACK", request.with_stack),
        ("PROFILE_WITH_FLOPS", request.with_flops),
        ("PROFILE_WITH_MODULES", request.with_modules),
        ("PROFILE_ACTIVITIES", list(request.activities)),
        ("PROFILE_ANALYSE", request.analyse),
        ("PROFILE_ASYNC_MODE", request.async_mode),
        ("PROFILE_PROFILER_LEVEL", request.profiler_level or "Level0"),
        ("PROFILE_AIC_METRICS", request.aic_metrics or "AiCoreNone"),
        ("PROFILE_L2_CACHE", request.l2_cache),
        ("PROFILE_OP_ATTR", request.op_attr),
        ("PROFILE_MSPROF_TX", request.msprof_tx),
        (
            "PROFILE_GC_DETECT_THRESHOLD",
            request.gc_detect_threshold if request.HasField("gc_detect_threshold") else None,
        ),
        ("PROFILE_DATA_SIMPLIFICATION", request.data_simplification),
        ("PROFILE_EXPORT_TYPE", request.export_type or "Text"),
        ("PROFILE_HOST_SYS", list(request.host_sys)),
        ("PROFILE_SYS_IO", request.sys_io),
        ("PROFILE_SYS_INTERCONNECTION", request.sys_interconnection),
        ("PROFILE_MSTX_DOMAIN_INCLUDE", list(request.mstx_domain_include)),
        ("PROFILE_MSTX_DOMAIN_EXCLUDE", list(request.mstx_domain_exclude)),
        ("PROFILE_IS_RANK", bool(request.targets.ranks)),
        ("PROFILE_RANK_LIST", list(request.targets.ranks)),
    ]
    return render(lines)


def gpu_trace(request: pb.GpuTraceRequest) -> str:
    lines: Lines = [("ACTIVITIES_LOG_FILE", request.log_file)]
    if request.iterations > 0:
        lines += [
            ("PROFILE_START_ITERATION", 0),
            ("PROFILE_START_ITERATION_ROUNDUP", request.profile_start_iteration_roundup or 1),
            ("ACTIVITIES_ITERATIONS", request.iterations),
        ]
    else:
        lines += [
            ("PROFILE_START_TIME", request.profile_start_time_ms),
            ("ACTIVITIES_DURATION_MSECS", request.duration_ms),
        ]
    lines.append(("PROFILE_REPORT_INPUT_SHAPES", request.record_shapes))
    if request.profile_memory:
        lines += [
            ("PROFILE_PROFILE_MEMORY", True),
            ("PROFILE_MEMORY", True),
            ("PROFILE_MEMORY_DURATION_MSECS", request.duration_ms),
        ]
    lines += [
        ("PROFILE_WITH_STACK", request.with_stack),
        ("PROFILE_WITH_FLOPS", request.with_flops),
        ("PROFILE_WITH_MODULES", request.with_modules),
    ]
    return render(lines)


def npu_monitor(request: pb.NpuMonitorRequest) -> str:
    """msMonitor's npu-monitor keys; empty values stay empty (torch_npu keeps ``KEY=`` lines)."""
    lines = [
        ("NPU_MONITOR_START", _value(request.start)),
        ("NPU_MONITOR_STOP", _value(request.stop)),
        ("REPORT_INTERVAL_S", str(request.report_interval_s)),
        ("DURATION", repr(float(request.duration_s))),
        ("MSPTI_ACTIVITY_KIND", ",".join(request.activity_kinds) or "Marker"),
        ("NPU_MONITOR_LOG_FILE", request.log_file),
        ("NPU_MONITOR_EXPORT_TYPE", request.export_type or "DB"),
        ("JSONL_ROTATE_LOG_LINES", request.jsonl_rotate_log_lines),
        ("JSONL_ROTATE_LOG_FILES", request.jsonl_rotate_log_files),
        ("NPU_MONITOR_FILTER", request.filter),
        ("TOP_N", str(request.top_n or 10)),
    ]
    return "\n".join(f"{key}={value}" for key, value in lines)
