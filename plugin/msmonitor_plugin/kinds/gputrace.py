"""``gputrace``: dynolog's trace for stock Kineto, in dynolog's keys (reference/dynolog.md §4.1). Its
trace is one file, named as Kineto names it; torch.profiler records it, even where torch_npu is
imported."""

from __future__ import annotations

import os
from typing import Any, Dict

from msmonitor_contract import vocabulary as v
from msmonitor_contract.configtext import BOOL, INT, TEXT, FieldKeys, Key, Table, by_key, read, render
from msmonitor_contract.vocabulary import CommandKind

from .base import TorchOutput, TraceKind, TraceSpec, at_least, recording_options, time_based

KEYS: Table = (
    Key("ACTIVITIES_LOG_FILE", TEXT, v.DEFAULT_KINETO_LOG_FILE),
    Key("PROFILE_START_ITERATION", INT, 0),
    Key("PROFILE_START_ITERATION_ROUNDUP", INT, v.DEFAULT_START_ITERATION_ROUNDUP),
    Key("ACTIVITIES_ITERATIONS", INT, 0),
    Key("PROFILE_START_TIME", INT, 0),
    Key("ACTIVITIES_DURATION_MSECS", INT, v.DEFAULT_DURATION_MS),
    Key("PROFILE_REPORT_INPUT_SHAPES", BOOL, False),
    Key("PROFILE_PROFILE_MEMORY", BOOL, False),
    Key("PROFILE_MEMORY", BOOL, False),
    Key("PROFILE_MEMORY_DURATION_MSECS", INT, 0),
    Key("PROFILE_WITH_STACK", BOOL, False),
    Key("PROFILE_WITH_FLOPS", BOOL, False),
    Key("PROFILE_WITH_MODULES", BOOL, False),
)

# The fields of a command (dyno's GpuTraceRequest, the daemon's command) that are keys as they are, by
# name; whoever writes the text adds the keys it derives (iteration mode's, the memory profile's).
FIELD_KEYS: FieldKeys = (
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
)


def render_command(command: Any) -> str:
    """A gputrace's text from a command with the FIELD_KEYS fields (the daemon's, or dyno's request to a
    C++ daemon), as dynolog's dyno writes it: iteration mode's three keys or the time window's two, and
    the memory profile's three only when asked for."""
    values = by_key(FIELD_KEYS, command)
    if command.iterations > 0:
        values["PROFILE_START_ITERATION"] = 0
        values["PROFILE_START_ITERATION_ROUNDUP"] = (
            command.profile_start_iteration_roundup or v.DEFAULT_START_ITERATION_ROUNDUP
        )
        unused = ["PROFILE_START_TIME", "ACTIVITIES_DURATION_MSECS"]
    else:
        unused = ["PROFILE_START_ITERATION_ROUNDUP", "ACTIVITIES_ITERATIONS"]
    if command.profile_memory:
        values.update(PROFILE_MEMORY=True, PROFILE_MEMORY_DURATION_MSECS=command.duration_ms)
    else:
        unused.append("PROFILE_PROFILE_MEMORY")
    return render(KEYS, {key: value for key, value in values.items() if key not in unused})


def parse(trace_id: str, raw: Dict[str, str]) -> TraceSpec:
    values = read(KEYS, raw)
    check = at_least(values, raw)
    spec = TraceSpec(CommandKind.GPUTRACE, trace_id, values["ACTIVITIES_LOG_FILE"], activities=["CPU", "GPU"])
    spec.iterations = check("ACTIVITIES_ITERATIONS", 0)
    if spec.step_based:
        spec.start_step = -1
        spec.start_roundup = max(
            v.DEFAULT_START_ITERATION_ROUNDUP, check("PROFILE_START_ITERATION_ROUNDUP", 0)
        )
    else:
        time_based(spec, check)
    recording_options(spec, values, shapes_key="PROFILE_REPORT_INPUT_SHAPES")
    return spec


def kineto_output_file(log_file: str, pid: int) -> str:
    """Where Kineto writes *pid*'s trace: ``_<pid>`` before ``.pt.trace.json``, else before ``.json``."""
    for suffix in (".pt.trace.json", ".json"):
        if suffix in log_file:
            head, _, tail = log_file.partition(suffix)
            return f"{head}_{pid}{suffix}{tail}"
    return log_file


def _torch_output(spec: TraceSpec, host: str, pid: int) -> TorchOutput:
    """Where stock Kineto would write it: the trace is that one file."""
    file = kineto_output_file(spec.log_file, pid)
    return TorchOutput(os.path.dirname(file) or ".", file, file)


KIND = TraceKind(
    CommandKind.GPUTRACE,
    KEYS,
    parse,
    _torch_output,
    folder=lambda spec: _torch_output(spec, "", os.getpid()).folder,
)
