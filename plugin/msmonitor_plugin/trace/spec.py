"""What a trace command asks for, parsed from its config text into one :class:`TraceSpec`.

nputrace arrives as msMonitor's keys (the same text torch_npu parses), gputrace as Kineto's. Both
become a start (a step, a step multiple, or a time), a stop (a number of steps or a duration), the
recording options, and where the output goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .. import wire


class SpecError(ValueError):
    """The config text asks for something invalid; the message names the key."""


@dataclass
class TraceSpec:
    kind: str  # wire.NPUTRACE or wire.GPUTRACE
    trace_id: str
    log_file: str  # nputrace: output directory; gputrace: Kineto's file name (``_<pid>`` gets inserted)
    start_step: Optional[int] = None  # -1: the next step to begin
    start_roundup: int = 0  # gputrace iteration mode: start at the next multiple of this
    start_time_ms: int = 0  # time-based: epoch ms (0: now)
    iterations: int = 0  # > 0: step-based
    duration_ms: int = 0
    activities: List[str] = field(default_factory=lambda: ["CPU", "NPU"])
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    analyse: bool = False
    # Ascend-only settings passed through to torch_npu's experimental config.
    npu: Dict[str, str] = field(default_factory=dict)

    @property
    def step_based(self) -> bool:
        return self.iterations > 0


def parse_lines(text: str) -> Dict[str, str]:
    """KEY=VALUE lines, trimmed; blank lines and ``#`` comments skipped (as Kineto and torch_npu do)."""
    values = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise SpecError(f"config line {line!r} is not KEY=VALUE")
        values[key.strip()] = value.strip()
    return values


def parse(command: wire.Command) -> TraceSpec:
    values = parse_lines(command.config)
    if command.kind == wire.NPUTRACE:
        return _npu(command.trace_id, values)
    if command.kind == wire.GPUTRACE:
        return _kineto(command.trace_id, values)
    raise SpecError(f"unknown trace kind {command.kind!r}")


def _npu(trace_id: str, v: Dict[str, str]) -> TraceSpec:
    spec = TraceSpec(wire.NPUTRACE, trace_id, _required(v, "ACTIVITIES_LOG_FILE"))
    spec.iterations = _int(v, "ACTIVITIES_ITERATIONS", 0, minimum=0)
    if spec.step_based:
        spec.start_step = _int(v, "PROFILE_START_STEP", -1, minimum=-1)
    else:
        spec.start_time_ms = _int(v, "PROFILE_START_TIME", 0, minimum=0)
        spec.duration_ms = _int(v, "ACTIVITIES_DURATION_MSECS", 0, minimum=1)
    spec.activities = [a for a in v.get("PROFILE_ACTIVITIES", "CPU,NPU").split(",") if a]
    spec.record_shapes = _bool(v, "PROFILE_RECORD_SHAPES")
    spec.profile_memory = _bool(v, "PROFILE_PROFILE_MEMORY")
    spec.with_stack = _bool(v, "PROFILE_WITH_STACK")
    spec.with_flops = _bool(v, "PROFILE_WITH_FLOPS")
    spec.with_modules = _bool(v, "PROFILE_WITH_MODULES")
    spec.analyse = _bool(v, "PROFILE_ANALYSE")
    spec.npu = {k: val for k, val in v.items() if k.startswith("PROFILE_") and k not in _COMMON_KEYS}
    return spec


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


def _kineto(trace_id: str, v: Dict[str, str]) -> TraceSpec:
    spec = TraceSpec(
        wire.GPUTRACE,
        trace_id,
        v.get("ACTIVITIES_LOG_FILE", "/tmp/libkineto_activities.json"),
        activities=["CPU", "GPU"],
    )
    spec.iterations = _int(v, "ACTIVITIES_ITERATIONS", 0, minimum=0)
    if spec.step_based:
        spec.start_step = -1
        spec.start_roundup = max(1, _int(v, "PROFILE_START_ITERATION_ROUNDUP", 1, minimum=0))
    else:
        spec.start_time_ms = _int(v, "PROFILE_START_TIME", 0, minimum=0)
        spec.duration_ms = _int(v, "ACTIVITIES_DURATION_MSECS", 500, minimum=1)
    spec.record_shapes = _bool(v, "PROFILE_REPORT_INPUT_SHAPES")
    spec.profile_memory = _bool(v, "PROFILE_PROFILE_MEMORY")
    spec.with_stack = _bool(v, "PROFILE_WITH_STACK")
    spec.with_flops = _bool(v, "PROFILE_WITH_FLOPS")
    spec.with_modules = _bool(v, "PROFILE_WITH_MODULES")
    return spec


def _required(v: Dict[str, str], key: str) -> str:
    value = v.get(key, "")
    if not value:
        raise SpecError(f"{key} is required")
    return value


def _int(v: Dict[str, str], key: str, default: int, minimum: int) -> int:
    raw = v.get(key, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SpecError(f"{key}={raw} is not an integer") from None
    if value < minimum:
        raise SpecError(f"{key}={raw} must be >= {minimum}")
    return value


def _bool(v: Dict[str, str], key: str) -> bool:
    return v.get(key, "false").lower() == "true"


def kineto_output_file(log_file: str, pid: int) -> str:
    """Where Kineto writes *pid*'s trace: ``_<pid>`` before ``.pt.trace.json``, else before ``.json``."""
    for suffix in (".pt.trace.json", ".json"):
        if suffix in log_file:
            head, _, tail = log_file.partition(suffix)
            return f"{head}_{pid}{suffix}{tail}"
    return log_file
