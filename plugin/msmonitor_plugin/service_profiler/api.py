"""The service profiler's instrumentation API, as MindIE 26.0's ``ms_service_profiler.profiler`` has it.

``Profiler(level)`` decides once, when it is made, whether it records (the switch is on, and its
``profiler_level`` reaches *level*, a :class:`Level`, an integer or a level's name): a disabled one costs
a few attribute reads per call. Builder methods return ``self`` and collect the attributes MindIE puts
in the message (``rid``, ``"name="``/``"name+"`` metrics, ``"scope#Name"``, ``type``); ``event``,
``span_start``/``span_end``, ``launch``, ``link`` and ``add_meta_info`` record. Recording only appends a
tuple to the store's queue: the message JSON is built on the writer's thread.

    Profiler(Level.INFO).domain("Request").res(rid).metric("recvTokenSize", n).event("httpReq")
    with Profiler(Level.INFO).domain("Execute").res(batch).span_start("forward"):
        model(batch)
"""

from __future__ import annotations

import os
import threading
import time
from enum import IntEnum
from typing import Any, Callable, Dict, FrozenSet, Optional, Union

from msmonitor_contract.service_tables import MarkType

from .config import LEVELS
from .store import ServiceStore

_EVENT, _SPAN, _LINK = int(MarkType.TYPE_EVENT), int(MarkType.TYPE_SPAN), int(MarkType.TYPE_LINK)


class Level(IntEnum):
    """MindIE's levels, their spelling included; equal values are aliases, as in MindIE."""

    ERROR = 10
    INFO = 20
    DETAILED = 30
    VERBOSE = 40
    LEVEL_CORE_TRACE = 10
    LEVEL_OUTLIER_ENENT = 10
    LEVEL_NORMAL_TRACE = 20
    LEVEL_DETAILED_TRACE = 30
    L0 = 10
    L1 = 20
    L2 = 30


def level_value(level: Union[int, str]) -> int:
    """A level as a number: an integer (a Level) as it is, a name as the switch file spells it; an
    unknown name counts as INFO (MindIE's default)."""
    if isinstance(level, int):
        return level
    return LEVELS.get(str(level).upper(), Level.INFO)


class Recording:
    """What the switch turned on: the level and domains recorded, and where rows go."""

    def __init__(
        self, level: int, domains: Optional[FrozenSet[str]], store: ServiceStore, on_step: Callable[[], None]
    ) -> None:
        self.level = level
        self.domains = domains
        self.store = store
        self.on_step = on_step

    def records(self, level: Union[int, str]) -> bool:
        return self.level >= level_value(level)

    def records_domain(self, domain: str) -> bool:
        return self.domains is None or domain in self.domains


_active: Optional[Recording] = None


class _ThreadId(threading.local):
    """The OS thread id (what MindIE's writer records: gettid), asked once per thread."""

    def __init__(self) -> None:
        self.tid = threading.get_native_id()


_thread = _ThreadId()


def attach(recording: Optional[Recording]) -> None:
    """The switch's on (a recording) and off (None)."""
    global _active
    _active = recording


def active() -> Optional[Recording]:
    return _active


def _after_fork() -> None:
    """A forked child (a worker started with fork) inherits the recording but not the store's thread: it
    must not queue rows nobody writes; and its threads have ids of their own."""
    global _thread
    attach(None)
    _thread = _ThreadId()


os.register_at_fork(after_in_child=_after_fork)


def prof_step(stop_check: bool = False) -> None:
    """MindIE's step mark: the one thing counted toward ``profiler_step_num`` (a ``forward`` span is not:
    MindIE's handlers emit both). ``stop_check`` only checks, as in MindIE."""
    recording = _active
    if recording is not None and not stop_check:
        recording.on_step()


def put_slice(name: str, domain: str, start_ns: int, end_ns: int, message: Any) -> None:
    """A slice with a message already built (``mstx``'s entry points); *message* a str or a dict."""
    recording = _active
    if recording is not None:
        recording.store.put(("slice", name, domain, start_ns, end_ns, _thread.tid, message))


def put_meta(name: str, value: Any) -> None:
    recording = _active
    if recording is not None:
        recording.store.put(("meta", name, str(value)))


class Profiler:
    __slots__ = ("_attrs", "_domain", "_name", "_recording", "_shared", "_start_ns")

    def __init__(self, profiler_level: Union[int, str] = Level.INFO) -> None:
        recording = _active
        if recording is None or recording.level < (
            profiler_level if isinstance(profiler_level, int) else level_value(profiler_level)
        ):
            self._recording: Optional[Recording] = None
            return  # disabled: nothing else is read, so nothing else is set
        self._recording = recording
        self._attrs: Dict[str, Any] = {}
        self._shared = False  # _attrs went to the store with a row: copy before changing it
        self._domain = ""
        self._name = ""
        self._start_ns = 0

    @property
    def enable(self) -> bool:
        return self._recording is not None

    def is_enable(self) -> bool:
        return self._recording is not None

    # --- builders ---------------------------------------------------------------------------------

    def domain(self, name: str) -> Profiler:
        recording = self._recording
        if recording is not None:
            domains = recording.domains  # inline records_domain: this is on every call chain
            if domains is not None and name not in domains:
                self._recording = None
            self._domain = name
        return self

    def attr(self, key: str, value: Any) -> Profiler:
        if self._recording is not None:
            attrs = self._attrs
            if self._shared:
                attrs = self._attrs = dict(attrs)
                self._shared = False
            attrs[key] = value
        return self

    def res(self, rid: Any) -> Profiler:
        """The request id, or a batch's list of ids (or of ``{"rid": ..., "iter_size": ...}``)."""
        return self.attr("rid", rid)

    def metric(self, name: str, value: Any) -> Profiler:
        return self.attr(f"{name}=", value)

    def metric_inc(self, name: str, value: Any) -> Profiler:
        return self.attr(f"{name}+", value)

    def metric_scope(self, scope_name: str, scope_value: Any = 0) -> Profiler:
        return self.attr(f"scope#{scope_name}", scope_value)

    def metric_scope_as_req_id(self) -> Profiler:
        return self.attr("scope#", "req")

    # --- what records -----------------------------------------------------------------------------

    def event(self, name: str) -> None:
        if self._recording is not None:
            now = time.time_ns()
            self._put(name, now, now, _EVENT)

    def span_start(self, name: str) -> Profiler:
        if self._recording is not None:
            self.attr("type", _SPAN)
            self._name, self._start_ns = name, time.time_ns()
        return self

    def span_end(self) -> None:
        if self._recording is not None and self._start_ns:
            self._put(self._name, self._start_ns, time.time_ns(), _SPAN)
            self._start_ns = 0

    def __enter__(self) -> Profiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.span_end()

    def launch(self) -> None:
        """The attributes collected so far, as a "Launch" event."""
        self.event("Launch")

    def link(self, from_rid: Any, to_rid: Any) -> None:
        if self._recording is not None:
            self._attrs, self._shared = {"type": _LINK, "from": from_rid, "to": to_rid}, False
            now = time.time_ns()
            self._put("Link", now, now, _LINK)

    def add_meta_info(self, key: str, value: Any) -> None:
        if self._recording is not None:
            put_meta(key, value)

    def _put(self, name: str, start_ns: int, end_ns: int, mark_type: int) -> None:
        """The slice, its message the attributes with their ``type`` (which the store now shares)."""
        recording = self._recording
        if recording is not None:
            attrs = self._attrs
            if self._shared:
                attrs = self._attrs = dict(attrs)
            attrs["type"] = mark_type
            self._shared = True
            recording.store.put(("slice", name, self._domain, start_ns, end_ns, _thread.tid, attrs))
