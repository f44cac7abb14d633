"""What a trace kind's module declares (:class:`TraceKind`), and the :class:`TraceSpec` its parser fills.

Each trace kind is one module of this package: its key table (``KEYS``), its parser (config text →
TraceSpec) and its recorder hooks, named together in one ``KIND``. The router, the tracer and the
recorders find them through the package's registry, never by a kind's name.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional

from msmonitor_contract.configtext import ConfigTextError, Table
from msmonitor_contract.kinds.tracing import is_trace_stop
from msmonitor_contract.vocabulary import DEFAULT_NPU_ACTIVITIES, CommandKind, split_list

if TYPE_CHECKING:
    from ..trace.output import OutputFolder


@dataclass
class TraceSpec:
    kind: CommandKind  # a trace kind: NPUTRACE, GPUTRACE or DYNAMIC
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
    # A window: it runs until a stop command, not for a count or a duration.
    until_stopped: bool = False
    # The folder the trace writes into, opened when the trace is accepted (trace/recorders.check_output):
    # the recorders write through it, so a path swapped for a link since cannot move the trace.
    folder: Optional[OutputFolder] = None

    @property
    def step_based(self) -> bool:
        return self.iterations > 0


class TorchOutput(NamedTuple):
    """Where torch.profiler writes one trace of this process."""

    folder: str  # made when the trace is written
    file: str  # the Chrome trace
    reported: str  # what the daemon is told: the folder, or the file when the trace is that one file


def in_folder(folder: str, host: str, pid: int) -> TorchOutput:
    """A trace that is a folder of its own, holding ``<host>_<pid>.pt.trace.json``."""
    return TorchOutput(folder, os.path.join(folder, f"{host}_{pid}.pt.trace.json"), folder)


def log_file(spec: TraceSpec) -> str:
    return spec.log_file


@dataclass(frozen=True)
class TraceKind:
    """One trace kind, as its module declares it: all the tracer and the recorders ask of a kind."""

    command: CommandKind
    keys: Table
    # The config text's raw values → the spec (the trace id given); raises ConfigTextError naming the key.
    parse: Callable[[str, Dict[str, str]], TraceSpec]
    # Where torch.profiler writes the trace in this process (its host name and pid).
    torch_output: Callable[[TraceSpec, str, int], TorchOutput]
    # The folder torch_npu's profiler writes under, where the process has imported torch_npu; None: this
    # kind is recorded by torch.profiler even there.
    ascend_root: Optional[Callable[[TraceSpec], str]] = None
    # The folder the trace writes into, checked (made, written to) when the trace is accepted.
    folder: Callable[[TraceSpec], str] = log_file
    # Whether torch_npu's and MindSpore's own dynamic profiler takes it, through IPCMonitor, in a job run
    # with MSMONITOR_USE_DAEMON (they parse its text themselves): the plugin then leaves it to them.
    framework_takes: bool = False
    # Whether these raw values are the trace's stop command, not a trace.
    is_stop: Callable[[Dict[str, str]], bool] = is_trace_stop


def recording_options(spec: TraceSpec, v: Dict[str, Any], shapes_key: str) -> None:
    """The torch.profiler options every trace kind carries, from its read values."""
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


def at_least(v: Dict[str, Any], raw: Dict[str, str]) -> Callable[[str, int], int]:
    """``at_least(key, minimum)`` over a kind's read values *v* and the raw values they came from."""
    return functools.partial(_at_least, v, raw)


def time_based(spec: TraceSpec, check: Callable[[str, int], int]) -> None:
    """A trace that is not step-based starts at a time (0: now) and runs for a duration."""
    spec.start_time_ms = check("PROFILE_START_TIME", 0)
    spec.duration_ms = check("ACTIVITIES_DURATION_MSECS", 1)
