"""``gputrace``: dynolog's trace for stock Kineto, declared once, in dynolog's keys (reference/dynolog.md
§4.1). Its trace is one file, named as Kineto names it."""

from __future__ import annotations

from typing import Any, Dict, List

from .. import rules
from .. import vocabulary as v
from ..configtext import BOOL as BOOL_KEY
from ..configtext import INT as INT_KEY
from ..configtext import Key
from ..rules import FieldError
from ..schema import Field, KeyOf, Kind, Message, Usage
from ..targets import TARGETS
from ..values import BOOL, INT, TEXT
from .tracing import MAX_STEP, iterations, switch, trigger

START_ITERATION = Key("PROFILE_START_ITERATION", INT_KEY, 0)
# The memory profile's: Kineto records memory for the trace's duration when PROFILE_MEMORY is true.
MEMORY = Key("PROFILE_MEMORY", BOOL_KEY, False)
MEMORY_DURATION = Key("PROFILE_MEMORY_DURATION_MSECS", INT_KEY, 0)


def kineto_output_file(log_file: str, pid: int) -> str:
    """Where Kineto writes *pid*'s trace: ``_<pid>`` before ``.pt.trace.json``, else before ``.json``."""
    for suffix in (".pt.trace.json", ".json"):
        if suffix in log_file:
            head, _, tail = log_file.partition(suffix)
            return f"{head}_{pid}{suffix}{tail}"
    return log_file


def _check(request: Any) -> List[FieldError]:
    if request.iterations == 0:
        errors = trigger(request)
    else:
        errors = iterations(request.iterations, "or absent for a duration trace")
    if request.profile_memory and request.iterations > 0:
        errors.append(FieldError("profile_memory", "works with duration traces only, not with --iterations"))
    return errors


def _shape(request: Any, values: Dict[str, Any]) -> Dict[str, Any]:
    """As dynolog's dyno writes it: iteration mode's three keys or the time window's two, and the memory
    profile's three only when asked for."""
    if request.iterations > 0:
        values[START_ITERATION.name] = 0
        unused = ["PROFILE_START_TIME", "ACTIVITIES_DURATION_MSECS"]
    else:
        unused = ["PROFILE_START_ITERATION_ROUNDUP", "ACTIVITIES_ITERATIONS"]
    if request.profile_memory:
        values.update({MEMORY.name: True, MEMORY_DURATION.name: request.duration_ms})
    else:
        unused.append("PROFILE_PROFILE_MEMORY")
    return {key: value for key, value in values.items() if key not in unused}


GPUTRACE = Kind(
    v.CommandKind.GPUTRACE,
    "GpuTrace",
    Message(
        "GpuTraceRequest",
        (
            Field("targets", TARGETS),
            Field(
                "log_file",
                TEXT,
                "trace file on the traced node; _<pid> is inserted before .json",
                key=KeyOf("ACTIVITIES_LOG_FILE", default=v.DEFAULT_KINETO_LOG_FILE),
                check=rules.all_of(rules.output_path, rules.kineto_file),
                required=True,
            ),
            START_ITERATION,
            Field(
                "profile_start_iteration_roundup",
                INT,
                "start at the next multiple of this step",
                default=v.DEFAULT_START_ITERATION_ROUNDUP,
                key=KeyOf("PROFILE_START_ITERATION_ROUNDUP", empty_is_default=True),
                check=rules.within(0, MAX_STEP, f"in 1..{MAX_STEP} (0: the default)"),
            ),
            Field(
                "iterations",
                INT,
                "steps to record (iteration mode); without it the trace lasts --duration-ms",
                default=-1,  # dynolog's "not given": 0 on the wire
                key=KeyOf("ACTIVITIES_ITERATIONS", default=0),
            ),
            Field(
                "profile_start_time_ms",
                INT,
                "epoch ms to start; 0: now",
                default=0,
                key="PROFILE_START_TIME",
                flag="--profile-start-time",
            ),
            Field(
                "duration_ms",
                INT,
                "length of the trace (without --iterations)",
                default=v.DEFAULT_DURATION_MS,
                key="ACTIVITIES_DURATION_MSECS",
            ),
            switch("record_shapes", "PROFILE_REPORT_INPUT_SHAPES", "operator input shapes"),
            switch("profile_memory", "PROFILE_PROFILE_MEMORY", "memory profile (duration traces)"),
            MEMORY,
            MEMORY_DURATION,
            Field(
                "with_stack",
                BOOL,
                "Python call stacks",
                key="PROFILE_WITH_STACK",
                flag="--with-stacks",
                aliases=("--with-stack",),
            ),
            switch("with_flops", "PROFILE_WITH_FLOPS", "operator FLOPs"),
            switch("with_modules", "PROFILE_WITH_MODULES", "module hierarchy"),
        ),
        checks=(_check,),
    ),
    Usage(legacy=(v.DYNOLOG_DAEMON, v.MSMONITOR_DAEMON), shape=_shape),
)
