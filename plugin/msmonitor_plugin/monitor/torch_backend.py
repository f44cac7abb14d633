"""The PyTorch backend, for GPU and CPU-only machines: ``torch.profiler`` in sampled windows.

What each kind means here (and nothing else is faked: other requested kinds are reported unavailable):

========================  ======================================================================
Kind                      Source
========================  ======================================================================
Kernel (CUDA present)     CUDA kernels (Kineto ``kernel`` activity), on their device
Kernel (CPU only)         CPU operators, each measured by its *self* time (its duration less that
                          of the operators it calls): where the CPU computed, without counting a
                          nested operator twice (``aten::addmm`` is its GEMM, not ``aten::linear``);
                          device -1, type ``cpu_op_self``, ``end_ns = start_ns + self time``
API                       top-level framework operators (no operator above them: ``aten::linear``,
                          ``autograd::engine::evaluate_function: AddmmBackward0``, ``c10d::allreduce_``
                          called by the training loop…), device -1, on their process and thread
Marker                    ``torch.profiler.record_function`` ranges (incl. the optimizer's own),
                          domain ``default``, device -1, on their thread; id the range's correlation id
Communication             c10d collectives (``c10d::allreduce_``…) as called on the host, device -1
RuntimeAPI (CUDA)         CUDA runtime/driver calls (``cudaLaunchKernel``…), device -1, on their thread
MemCpy / MemSet (CUDA)    device copies and memsets, on their device
Hccl, Memory, AclAPI,     unavailable (Ascend-only, or no torch.profiler equivalent)
NodeAPI
========================  ======================================================================

Overhead: profiling every operator costs several µs per operator (collection, then a pass over the
events at stop), far above the ≤ 3 % goal for small-operator loops. So the backend **samples**: at the
start of each report interval it profiles one window, then stops. The window adapts so that the measured
cost (stop + parse, and the in-window slowdown estimated from them) stays within ``budget`` (default
1 %) of the interval; it starts at 0.1 s, at most doubles per interval, and never exceeds
``MSMONITOR_TORCH_SAMPLE_S`` (default 1 s). Reports say how much time was sampled (``sampled_ns``).
The profiler runs on the monitor thread and records all threads (``profile_all_threads``, checked at
start; 2.13 is tested); with a torch that lacks it the backend is unavailable. torch is never imported
here: the module the process already imported is passed in.

Kineto initialises itself at the first profiler start in the process, and prints "External init callback
must run in same thread as registerClient" to the job's stderr when that start is not on the thread that
imported torch. So the process's first window opens at a step boundary, on the training thread (stopped
later from the monitor thread, which Kineto allows); every later window opens on the monitor thread.
A process without step boundaries (no optimizer steps) gets its first window from the monitor thread one
interval late, and the line with it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Tuple

from msmonitor_contract.activity import HOST, Kind
from msmonitor_contract.vocabulary import KINETO_QUIET

from ..steps import AtNextStep
from .records import HostExtras, MarkerExtras, Record, clip_name

log = logging.getLogger("msmonitor_plugin")

MARKER_DOMAIN = "default"
COMM_PREFIXES = ("c10d::",)
SELF_TIME_TYPE = "cpu_op_self"
CPU_KINDS: Dict[Kind, str] = {
    Kind.KERNEL: "CPU operators, self time",
    Kind.API: "top-level framework operators",
    Kind.MARKER: "record_function ranges",
    Kind.COMMUNICATION: "c10d collectives",
}
CUDA_KINDS: Dict[Kind, str] = {
    Kind.KERNEL: "CUDA kernels",
    Kind.RUNTIME_API: "CUDA runtime calls",
    Kind.MEMCPY: "CUDA memcpy",
    Kind.MEMSET: "CUDA memset",
}
UNAVAILABLE_REASON = "not observable through torch.profiler"
MIN_WINDOW_S = 0.05
FIRST_WINDOW_S = 0.1
# The in-window slowdown per event relative to the stop pass (measured 6.8 vs 4.5 µs, rounded up), and
# the parse counted twice: it holds the GIL the training thread needs.
IN_WINDOW_COST = 2.0
PARSE_COST = 2.0


_kineto_initialised = False  # this process's Kineto, by a window this module opened (per process, once)


class TorchUnavailable(RuntimeError):
    pass


class Sampler:
    """Sizes the profiling window from the cost of the last one (see the module docstring)."""

    def __init__(self, max_window_s: float = 1.0, budget: float = 0.01) -> None:
        self.max_window_s = max_window_s
        self.budget = budget
        self.window_s = min(FIRST_WINDOW_S, max_window_s)

    def observe(self, window_s: float, stop_s: float, parse_s: float, interval_s: float) -> None:
        cost = stop_s * (1 + IN_WINDOW_COST) + parse_s * PARSE_COST
        target = self.budget * interval_s
        scaled = window_s * target / cost if cost > 0 else self.max_window_s
        self.window_s = max(MIN_WINDOW_S, min(self.max_window_s, scaled, 2 * max(window_s, MIN_WINDOW_S)))


class TorchBackend:
    name = "torch"

    def __init__(
        self, torch: Any, env: Mapping[str, str] = os.environ, at_next_step: Optional[AtNextStep] = None
    ) -> None:
        self.torch = torch
        self.at_next_step = at_next_step
        self._check_version()
        self.cuda = bool(torch.cuda.is_available())
        self.host_is_device = not self.cuda  # CPU operators are the Kernel kind: the CPU is the device
        self.provides = {**CPU_KINDS, **CUDA_KINDS} if self.cuda else dict(CPU_KINDS)
        self.sampler = Sampler(_env_float(env, "MSMONITOR_TORCH_SAMPLE_S", 1.0), 0.01)
        self.kinds: FrozenSet[Kind] = frozenset()
        self.collector: Any = None
        self._profiler: Any = None
        self._window_start = 0.0
        self._window_end = 0.0
        self._interval_s = 60.0
        self._sampled_ns = 0
        self._lock = threading.Lock()  # the window, opened on the training thread or the monitor thread
        self._cancel_opening: Optional[Callable[[], None]] = None  # the first window, awaiting a step
        # Kineto prints two lines to stderr per profiler start/stop unless told otherwise; the process's
        # output is not ours to write into. Only effective before Kineto's first use; never overrides.
        os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)

    def _check_version(self) -> None:
        profiler = getattr(self.torch, "_C", None)
        config = getattr(getattr(profiler, "_profiler", None), "_ExperimentalConfig", None)
        try:
            config(profile_all_threads=True)  # type: ignore[misc]
        except TypeError as exc:
            raise TorchUnavailable(f"torch {self.torch.__version__} cannot profile all threads") from exc

    def unavailable(self, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        reason = UNAVAILABLE_REASON if self.cuda else UNAVAILABLE_REASON + " on a machine without CUDA"
        return {k: reason for k in kinds if k not in self.provides}

    def start(self, collector: Any, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        self.collector = collector
        return self.set_kinds(kinds)

    def set_kinds(self, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        self.kinds = frozenset(k for k in kinds if k in self.provides)
        return self.unavailable(kinds)

    def begin_interval(self, now: float, interval_s: float) -> None:
        """Open this interval's profiling window (the monitor thread calls this at each interval start)."""
        self._interval_s = interval_s
        with self._lock:
            waited = self._cancel_pending_open()  # no step came in a whole interval: open it here
            if self._profiler is not None or not self.kinds:
                return
            if not _kineto_initialised and not waited and self.at_next_step is not None:
                self._cancel_opening = self.at_next_step(self._open_at_step)
                if self._cancel_opening is not None:
                    return
            self._open(now)

    def poll(self, now: float) -> Optional[float]:
        """Close the window when it is due; returns when to be called next (None: nothing open)."""
        with self._lock:
            if self._cancel_opening is not None:  # the training thread opens it: look again shortly
                return now + MIN_WINDOW_S
            if self._profiler is None:
                return None
            if now < self._window_end:
                return self._window_end
            self._close_window(now)
            return None

    def flush(self) -> None:
        """End of an interval: a window still open is closed so its records count in this report."""
        with self._lock:
            if self._profiler is not None:
                self._close_window(time.monotonic())

    def take_sampled_ns(self) -> Optional[int]:
        sampled, self._sampled_ns = self._sampled_ns, 0
        return sampled

    def stop(self) -> None:
        with self._lock:
            self._cancel_pending_open()
        self.flush()
        self.collector = None

    def _cancel_pending_open(self) -> bool:
        """Forget a first window still waiting for a step; whether there was one."""
        cancel, self._cancel_opening = self._cancel_opening, None
        if cancel is not None:
            cancel()
        return cancel is not None

    def _open_at_step(self) -> None:
        """On the training thread, at a step boundary: the process's first window."""
        with self._lock:
            if self._cancel_opening is None:  # cancelled meanwhile (the monitor stopped)
                return
            self._cancel_opening = None
            self._open(time.monotonic())

    def _open(self, now: float) -> None:
        global _kineto_initialised
        window = min(self.sampler.window_s, self._interval_s / 2)
        try:
            self._profiler = self._new_profiler()
            self._profiler.start()
        except Exception as exc:  # e.g. the program (or a trace) already runs a profiler
            self._profiler = None
            self.collector.drop("torch_window_skipped")
            log.warning("torch profiler window skipped: %s", exc)
            return
        _kineto_initialised = True
        self._window_start = now
        self._window_end = now + window

    def _new_profiler(self) -> Any:
        from_profiler = self.torch.profiler
        activities = [from_profiler.ProfilerActivity.CPU]
        if self.cuda and self.kinds & CUDA_KINDS.keys():
            activities.append(from_profiler.ProfilerActivity.CUDA)
        config = self.torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
        return from_profiler.profile(
            activities=activities,
            record_shapes=False,
            profile_memory=False,
            with_stack=False,
            experimental_config=config,
        )

    def _close_window(self, now: float) -> None:
        profiler, self._profiler = self._profiler, None
        t0 = time.monotonic()
        try:
            profiler.stop()
            events = profiler.profiler.kineto_results.events()
        except Exception as exc:
            self.collector.drop("torch_window_failed")
            log.warning("torch profiler window lost: %s", exc)
            return
        t1 = time.monotonic()
        records = classify(events, self.kinds, self.cuda)
        self.collector.add_records(records)
        t2 = time.monotonic()
        window = max(0.0, min(now, self._window_end) - self._window_start)
        self._sampled_ns += int((t0 - self._window_start) * 1e9)
        self.sampler.observe(window, t1 - t0, t2 - t1, self._interval_s)
        self.collector.count("torch_events", len(events))


class _Span(NamedTuple):
    """A host event: an operator, or a marker (record_function range)."""

    start: int
    end: int
    name: str
    thread: int
    correlation_id: int
    is_op: bool
    os_tid: int  # the OS thread id


def classify(events: List[Any], kinds: FrozenSet[Kind], cuda: bool) -> List[Record]:
    """Kineto events → records of the requested kinds (see the table in the module docstring).

    Kineto's resource id is the OS thread of a host event and the stream of a device one."""
    records: List[Record] = []
    cpu: List[_Span] = []
    for ev in events:
        activity = ev.activity_type()
        if activity == "cpu_op" or activity == "user_annotation":
            cpu.append(
                _Span(
                    ev.start_ns(),
                    ev.end_ns(),
                    ev.name(),
                    ev.start_thread_id(),
                    ev.correlation_id(),
                    activity == "cpu_op",
                    ev.device_resource_id(),
                )
            )
        elif cuda:
            kind = _DEVICE_ACTIVITIES.get(activity)
            if kind is not None and kind in kinds:
                records.append(_device_record(ev, kind, activity))
    records.extend(_cpu_records(cpu, kinds, cpu_kernels=not cuda))
    return records


def _device_record(ev: Any, kind: Kind, activity: str) -> Record:
    start, end, name, corr = ev.start_ns(), ev.end_ns(), clip_name(ev.name()), ev.correlation_id()
    if kind == Kind.RUNTIME_API:  # called on the host
        return Record(
            kind, start, end, HOST, 0, corr, name, activity, HostExtras(os.getpid(), ev.device_resource_id())
        )
    return Record(kind, start, end, ev.device_index(), ev.device_resource_id(), corr, name, activity)


_DEVICE_ACTIVITIES = {
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "cuda_runtime": Kind.RUNTIME_API,
    "cuda_driver": Kind.RUNTIME_API,
}


def _cpu_records(spans: List[_Span], kinds: FrozenSet[Kind], cpu_kernels: bool) -> List[Record]:
    """Walk each thread's operator tree once: top-level operators, operator self time, markers,
    collectives."""
    spans.sort(key=lambda s: (s.thread, s.start, -s.end))
    top_level, self_ns = _operator_tree(spans)
    pid = os.getpid()
    out: List[Record] = []
    for i, span in enumerate(spans):
        if not span.is_op:
            if Kind.MARKER in kinds:
                extras = MarkerExtras(MARKER_DOMAIN, "Host", 2, span.correlation_id, pid, span.os_tid)
                out.append(_marker(span, extras))
            continue
        if top_level[i] and Kind.API in kinds:
            out.append(_record(Kind.API, span, "cpu_op", HostExtras(pid, span.os_tid)))
        if span.name.startswith(COMM_PREFIXES):
            if Kind.COMMUNICATION in kinds:
                out.append(_record(Kind.COMMUNICATION, span, "cpu_op"))
        elif cpu_kernels and Kind.KERNEL in kinds:
            self_time = span._replace(end=span.start + self_ns[i])
            out.append(_record(Kind.KERNEL, self_time, SELF_TIME_TYPE))
    return out


def _operator_tree(spans: List[_Span]) -> Tuple[List[bool], List[int]]:
    """For spans sorted by (thread, start, -end): which operators have no operator above them, and each
    operator's self time (its duration less that of the operators it calls directly). Markers
    (record_function ranges) are transparent."""
    nearest_op = [-1] * len(spans)  # the closest enclosing operator of each span (itself for an op)
    top_level = [False] * len(spans)
    self_ns = [end - start for start, end, *_ in spans]
    stack: List[int] = []
    for i, span in enumerate(spans):
        while stack and (spans[stack[-1]].thread != span.thread or spans[stack[-1]].end <= span.start):
            stack.pop()
        above = nearest_op[stack[-1]] if stack else -1
        if span.is_op:
            top_level[i] = above < 0
            if above >= 0:
                self_ns[above] -= span.end - span.start
        nearest_op[i] = i if span.is_op else above
        stack.append(i)
    return top_level, [max(0, t) for t in self_ns]


def _record(kind: Kind, span: _Span, type_: str, host: Optional[HostExtras] = None) -> Record:
    """A host record of the operator tree."""
    return Record(kind, span.start, span.end, HOST, 0, span.correlation_id, clip_name(span.name), type_, host)


def _marker(span: _Span, extras: MarkerExtras) -> Record:
    return Record(Kind.MARKER, span.start, span.end, HOST, 0, 0, clip_name(span.name), "", extras)


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default
