"""What the trace kinds' declarations share: the bounds of a trace, and the check of what starts and
ends one (a count of steps, or a duration from a time)."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from .. import rules
from .. import vocabulary as v
from ..configtext import BOOL as BOOL_KEY
from ..configtext import Key, read, render
from ..rules import FieldError
from ..schema import Field
from ..values import BOOL, NAMES

# A step number, a count of steps, a roundup: beyond these a trace waits for ever or records without end
# (each step recorded is kept in the job's memory until the trace is written).
MAX_STEP = 1_000_000_000
MAX_ITERATIONS = 1000
MAX_DURATION_MS = 3_600_000  # a time-based trace: one hour
ACTIVITIES = ("CPU", "NPU")


def switch(name: str, key: str, help: str) -> Field:
    """A flag that takes no value, written as its key's true or false."""
    return Field(name, BOOL, help, key=key)


# torch_npu's profiler options that nputrace and a dynamic window both take, under the same keys.
NPU_ACTIVITIES = Field(
    "activities",
    NAMES,
    "CPU, NPU or both",
    default=v.DEFAULT_NPU_ACTIVITIES,
    key="PROFILE_ACTIVITIES",
    check=rules.some_of(ACTIVITIES, required=True),
)
RECORD_SHAPES = switch("record_shapes", "PROFILE_RECORD_SHAPES", "operator input shapes and types")
PROFILE_MEMORY = switch("profile_memory", "PROFILE_PROFILE_MEMORY", "operator memory")
WITH_STACK = switch("with_stack", "PROFILE_WITH_STACK", "Python call stacks")
WITH_MODULES = switch("with_modules", "PROFILE_WITH_MODULES", "module hierarchy")


def iterations(value: int, otherwise: str) -> List[FieldError]:
    if 0 < value <= MAX_ITERATIONS:
        return []
    return [FieldError("iterations", f"must be in 1..{MAX_ITERATIONS} ({otherwise}), got {value}")]


def typed_iterations(count: Optional[int]) -> List[FieldError]:
    """``--iterations`` as a user typed it (None: not given). A request's 0 is "not given" (a time-based
    trace) on every wire, so a typed 0, or a count below it (gputrace's request holds none), is refused
    here, before the request is built: ``--iterations 0`` is no count of steps, not a time-based trace."""
    return [] if count is None or count > 0 else iterations(count, "or absent for a time-based trace")


def trigger(request: Any) -> List[FieldError]:
    """A step-based trace's count of steps, or a time-based one's duration and start time."""
    count, duration_ms, start_ms = request.iterations, request.duration_ms, request.profile_start_time_ms
    errors = iterations(count, "or absent for a time-based trace") if count else []
    if count == 0 and not 0 < duration_ms <= MAX_DURATION_MS:
        errors.append(
            FieldError(
                "duration_ms",
                f"must be in 1..{MAX_DURATION_MS} ms when --iterations is not given (a time-based trace), "
                f"got {duration_ms}",
            )
        )
    if start_ms < 0:
        errors.append(FieldError("profile_start_time_ms", f"must be epoch milliseconds >= 0, got {start_ms}"))
    if start_ms and count > 0:
        errors.append(FieldError("profile_start_time_ms", "applies to time-based traces; drop --iterations"))
    return errors


# A trace's stop (``dyno trace ID --cancel``): its kind's command again, with the trace's id and this one
# key; the tracer stops it as it stops a window. A window's stop is its own (DYNAMIC_ACTION=stop).
STOP_KEY = Key("TRACE_STOP", BOOL_KEY, False)


def is_trace_stop(raw: Mapping[str, str]) -> bool:
    return bool(read((STOP_KEY,), raw)[STOP_KEY.name])


def stop_text() -> str:
    return render((STOP_KEY,), {STOP_KEY.name: True})
