"""The daemon's own command model: which processes a command is for, what each kind asks, and what
became of it.

Every wire converts to and from these types at its edge (gRPC in :mod:`dynolog.rpc.convert`); the
pipeline, the kinds' policies, the stores and incidents see nothing else. Plain dataclasses: a new edge
builds them without fabricating another wire's messages, and incidents persist them as JSON.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import typing
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Dict, FrozenSet, List, Optional, Tuple, Type, TypeVar

from msmonitor_plugin.vocabulary import Reason

from .registry import ProcessRecord
from .traces import ProcessTrace


@dataclass(frozen=True)
class Targets:
    """Which processes a command is for; empty fields select every process."""

    job_id: int = 0
    pids: Tuple[int, ...] = ()  # a process matches when it, or one of its ancestors, is listed
    ranks: Tuple[int, ...] = ()
    process_limit: int = 0  # 0: no limit

    @cached_property
    def pid_set(self) -> FrozenSet[int]:
        """Built once per command, not once per process matched."""
        return frozenset(self.pids)

    @cached_property
    def rank_set(self) -> FrozenSet[int]:
        return frozenset(self.ranks)

    @classmethod
    def of_pid(cls, host_pid: int) -> Targets:
        return cls(pids=(host_pid,))


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


@dataclass(frozen=True)
class GpuTraceCommand:
    """``dyno gputrace``: dynolog's options, as Kineto reads them."""

    targets: Targets = field(default_factory=Targets)
    log_file: str = ""
    duration_ms: int = 0
    iterations: int = 0  # > 0: iteration mode
    profile_start_time_ms: int = 0
    profile_start_iteration_roundup: int = 0
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False


@dataclass(frozen=True)
class AutoTraceRule:
    """npu-monitor's ``--auto-trace``: when a slowdown is an incident, and how often one is traced."""

    slowdown: float = 0.0
    for_intervals: int = 0
    iterations: int = 0
    cooldown_s: int = 0
    max_per_day: int = 0


@dataclass(frozen=True)
class NpuMonitorCommand:
    """``dyno npu-monitor``: start, change or stop each process's monitor."""

    targets: Targets = field(default_factory=Targets)
    start: bool = False
    stop: bool = False
    report_interval_s: int = 0  # 0: leave unchanged
    duration_s: float = 0.0  # 0: until stopped
    activity_kinds: Tuple[str, ...] = ()
    log_file: str = ""  # "": report to the daemon
    export_type: str = ""
    jsonl_rotate_log_lines: str = ""
    jsonl_rotate_log_files: str = ""
    filter: str = ""
    top_n: int = 0
    auto_trace: Optional[AutoTraceRule] = None  # None: no detection

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> NpuMonitorCommand:
        """The inverse of :meth:`to_json` (what an incident keeps to resume the monitor with)."""
        return from_fields(cls, d)


@dataclass(frozen=True)
class DynamicOptions:
    """What each ``dyno dynamic`` window records: nputrace's options and msprof's that apply."""

    activities: Tuple[str, ...] = ()
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_modules: bool = False
    task_time: str = ""
    runtime_api: bool = False
    aicpu: bool = False
    model_execution: bool = False
    hccl: bool = False
    msproftx: bool = False
    ascendcl: bool = False
    aic_metrics: str = ""
    l2: bool = False
    sys_hardware_mem: bool = False
    host_sys: Tuple[str, ...] = ()
    export_type: str = ""


@dataclass(frozen=True)
class Controller:
    """Who says they run a ``dyno dynamic`` session (under mutual TLS the certificate names them)."""

    user: str = ""
    uid: int = 0
    hostname: str = ""
    pid: int = 0


@dataclass(frozen=True)
class AttachCommand:
    """A ``dyno dynamic`` session's first request: its processes, where windows go, and its limits."""

    targets: Targets = field(default_factory=Targets)
    output: str = ""
    options: DynamicOptions = field(default_factory=DynamicOptions)
    idle_timeout_s: float = 0.0  # 0: the default
    command_limit: int = 0  # 0: the default
    wait_registration_s: float = 0.0  # launch mode: wait this long for a matching process
    client: Controller = field(default_factory=Controller)


_Model = TypeVar("_Model")


def from_fields(cls: Type[_Model], values: Dict[str, Any]) -> _Model:
    """*cls* from a mapping of its fields (JSON, or what an edge read off its wire): lists become
    tuples, nested models are built the same way, and absent fields keep their defaults."""
    hints = typing.get_type_hints(cls)
    kwargs: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if values.get(f.name) is None:
            continue
        value, nested = values[f.name], _model_in(hints[f.name])
        if nested is not None:
            value = from_fields(nested, value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def _model_in(hint: Any) -> Optional[type]:
    """The dataclass a field holds (also as ``Optional[...]``), or None."""
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
            return candidate
    return None


@dataclass
class Outcome:
    """What one matched process does with the command."""

    record: ProcessRecord
    reason: Optional[Reason] = None  # None: it took the command
    detail: str = ""  # why not (the reason's wording, or the process's own answer), or how it went
    expected_output: str = ""

    @property
    def triggered(self) -> bool:
        return self.reason is None

    def refuse(self, reason: Reason, detail: str = "") -> None:
        self.reason, self.detail = reason, detail or reason.value


@dataclass
class CommandResult:
    label: str  # "nputrace", "npu-monitor start", ... as the answer names the command
    outcomes: List[Outcome] = field(default_factory=list)
    refusal: Optional[Reason] = None  # refused before any process: none registered, none matched
    message: str = ""
    trace_id: str = ""

    @property
    def taken(self) -> List[Outcome]:
        return [o for o in self.outcomes if o.triggered]

    @property
    def effective(self) -> bool:
        return bool(self.taken)

    @property
    def reason(self) -> Optional[Reason]:
        """The refusal, or the most common reason among the processes when none took it."""
        if self.refusal is not None or self.effective:
            return self.refusal
        return collections.Counter(o.reason for o in self.outcomes).most_common(1)[0][0]

    def conclude(self) -> None:
        """Word the answer once every process's outcome is known."""
        if self.refusal is not None:
            return
        if self.effective:
            named = f"{self.label} {self.trace_id}" if self.trace_id else self.label
            self.message = f"{named} sent to {len(self.taken)} of {len(self.outcomes)} matched processes"
            return
        self.trace_id = ""
        why = next(o.detail for o in self.outcomes if o.reason is self.reason)
        self.message = f"no matched process can take {self.label}: {why}"


class SessionAction(enum.Enum):
    """What a ``dyno dynamic`` client asks of its session (NONE: news it did not ask for)."""

    NONE = 0
    ATTACH = 1
    START = 2
    STOP = 3
    STATUS = 4
    QUIT = 5  # stop collecting if collecting, then end the session


@dataclass(frozen=True)
class SessionStep:
    """One request on a session's stream."""

    seq: int
    action: SessionAction
    attach: Optional[AttachCommand] = None  # with ATTACH


@dataclass
class SessionProcess:
    """One process's part in a session's answer."""

    pid: int
    host_pid: int
    rank: int
    ok: bool
    detail: str
    window: Optional[ProcessTrace] = None  # the window's state in this process, when there is one


@dataclass
class SessionReply:
    seq: int  # of the request answered; 0: news nobody asked for
    action: SessionAction
    ok: bool  # at least one process did what was asked
    lines: List[str]
    processes: List[SessionProcess] = field(default_factory=list)
    window_id: str = ""
    ended: bool = False  # the session is over; the lines say why
    commands_left: int = 0
