"""What a trace command asks for, parsed from its config text into one :class:`TraceSpec`.

nputrace arrives as msMonitor's keys (the same text torch_npu parses), gputrace as Kineto's, a
``dyno dynamic`` window as the DYNAMIC keys. Each becomes a start (a step, a step multiple, a time, or
the next boundary), a stop (a number of steps, a duration, or a stop command), the recording options,
and where the output goes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import configtext, wire
from ..configtext import ConfigTextError
from ..vocabulary import DEFAULT_NPU_ACTIVITIES, CommandKind, split_list


@dataclass
class TraceSpec:
    kind: CommandKind  # NPUTRACE, GPUTRACE or DYNAMIC
    trace_id: str
    # nputrace: output directory; gputrace: Kineto's file name (``_<pid>`` gets inserted); dynamic: the
    # root its PROF_ directory is made under
    log_file: str
    start_step: Optional[int] = None  # -1: the next step to begin
    start_roundup: int = 0  # gputrace iteration mode: start at the next multiple of this
    start_time_ms: int = 0  # time-based: epoch ms (0: now)
    iterations: int = 0  # > 0: step-based
    duration_ms: int = 0
    activities: List[str] = field(default_factory=lambda: split_list(DEFAULT_NPU_ACTIVITIES))
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    analyse: bool = False
    # Ascend-only settings passed through to torch_npu's experimental config, as their text.
    npu: Dict[str, str] = field(default_factory=dict)
    # msprof's options a dynamic window was asked for (MSPROF_* keys that were given), as their text.
    msprof: Dict[str, str] = field(default_factory=dict)

    @property
    def step_based(self) -> bool:
        return self.iterations > 0

    @property
    def until_stopped(self) -> bool:
        """A dynamic window: it runs until a stop command, not for a count or a duration."""
        return self.kind == CommandKind.DYNAMIC


def parse(command: wire.Command) -> TraceSpec:
    """Raises ConfigTextError naming the key."""
    raw = configtext.parse(command.config)
    if command.kind == CommandKind.NPUTRACE:
        return _npu(command.trace_id, raw)
    if command.kind == CommandKind.GPUTRACE:
        return _kineto(command.trace_id, raw)
    if command.kind == CommandKind.DYNAMIC:
        return _dynamic(command.trace_id, raw)
    raise ConfigTextError(f"unknown trace kind {command.kind!r}")


def _npu(trace_id: str, raw: Dict[str, str]) -> TraceSpec:
    v = configtext.read(configtext.NPUTRACE, raw)
    at_least = functools.partial(_at_least, v, raw)
    if not v["ACTIVITIES_LOG_FILE"]:
        raise ConfigTextError("ACTIVITIES_LOG_FILE is required")
    spec = TraceSpec(CommandKind.NPUTRACE, trace_id, v["ACTIVITIES_LOG_FILE"])
    spec.iterations = at_least("ACTIVITIES_ITERATIONS", 0)
    if spec.step_based:
        spec.start_step = at_least("PROFILE_START_STEP", -1)
    else:
        spec.start_time_ms = at_least("PROFILE_START_TIME", 0)
        spec.duration_ms = at_least("ACTIVITIES_DURATION_MSECS", 1)
    spec.activities = v["PROFILE_ACTIVITIES"]
    _options(spec, v, shapes_key="PROFILE_RECORD_SHAPES")
    spec.analyse = v["PROFILE_ANALYSE"]
    spec.npu = {k: val for k, val in raw.items() if k.startswith("PROFILE_") and k not in _COMMON_KEYS}
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


def _kineto(trace_id: str, raw: Dict[str, str]) -> TraceSpec:
    v = configtext.read(configtext.GPUTRACE, raw)
    at_least = functools.partial(_at_least, v, raw)
    spec = TraceSpec(CommandKind.GPUTRACE, trace_id, v["ACTIVITIES_LOG_FILE"], activities=["CPU", "GPU"])
    spec.iterations = at_least("ACTIVITIES_ITERATIONS", 0)
    if spec.step_based:
        spec.start_step = -1
        spec.start_roundup = max(1, at_least("PROFILE_START_ITERATION_ROUNDUP", 0))
    else:
        spec.start_time_ms = at_least("PROFILE_START_TIME", 0)
        spec.duration_ms = at_least("ACTIVITIES_DURATION_MSECS", 1)
    _options(spec, v, shapes_key="PROFILE_REPORT_INPUT_SHAPES")
    return spec


def is_stop(command: wire.Command) -> bool:
    """A dynamic window's stop command (its start carries the options)."""
    action = configtext.read(configtext.DYNAMIC, configtext.parse(command.config))["DYNAMIC_ACTION"]
    if action not in (configtext.DYNAMIC_START, configtext.DYNAMIC_STOP):
        raise ConfigTextError(f"DYNAMIC_ACTION={action} is not start or stop")
    return bool(action == configtext.DYNAMIC_STOP)


def _dynamic(trace_id: str, raw: Dict[str, str]) -> TraceSpec:
    v = configtext.read(configtext.DYNAMIC, raw)
    if not v["DYNAMIC_OUTPUT"]:
        raise ConfigTextError("DYNAMIC_OUTPUT is required")
    spec = TraceSpec(CommandKind.DYNAMIC, trace_id, v["DYNAMIC_OUTPUT"], activities=v["PROFILE_ACTIVITIES"])
    _options(spec, {**v, "PROFILE_WITH_FLOPS": False}, shapes_key="PROFILE_RECORD_SHAPES")
    spec.analyse = True  # every window has its summary
    spec.msprof = {
        k: raw[k] for k in raw if k.startswith("MSPROF_") and v.get(k) not in (None, "", False, [])
    }
    return spec


def _options(spec: TraceSpec, v: Dict[str, Any], shapes_key: str) -> None:
    spec.record_shapes = v[shapes_key]
    spec.profile_memory = v["PROFILE_PROFILE_MEMORY"]
    spec.with_stack = v["PROFILE_WITH_STACK"]
    spec.with_flops = v["PROFILE_WITH_FLOPS"]
    spec.with_modules = v["PROFILE_WITH_MODULES"]


def _at_least(v: Dict[str, Any], raw: Dict[str, str], key: str, minimum: int) -> int:
    """The key's value; one that was given must be at least *minimum* (a default may be below it)."""
    value: int = v[key]
    if raw.get(key) and value < minimum:
        raise ConfigTextError(f"{key}={value} must be >= {minimum}")
    return value


def kineto_output_file(log_file: str, pid: int) -> str:
    """Where Kineto writes *pid*'s trace: ``_<pid>`` before ``.pt.trace.json``, else before ``.json``."""
    for suffix in (".pt.trace.json", ".json"):
        if suffix in log_file:
            head, _, tail = log_file.partition(suffix)
            return f"{head}_{pid}{suffix}{tail}"
    return log_file
