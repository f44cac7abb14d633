"""The service profiler's instrumentation API, as MindIE's ``ms_service_profiler`` has it.

``Profiler(level)`` decides once, when it is made, whether it records (the switch is on, and its
``profiler_level`` reaches *level*): a disabled one costs a few attribute reads per call. Builder
methods return ``self``; ``event``, ``span_start``/``span_end``, ``launch``, ``link`` and
``add_meta_info`` record. Recording only appends a tuple to the store's queue.

    Profiler(Level.INFO).domain("Request").res(rid).metric("recvTokenSize", n).event("httpReq")
    with Profiler(Level.INFO).domain("Execute").res(batch).span_start("forward"):
        model(batch)
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from .store import ServiceStore

# MindIE counts a step at each of these (MindIE's "forward", vLLM's "modelRunnerExec"), for
# profiler_step_num.
STEP_NAMES = frozenset({"forward", "modelRunnerExec"})


class Level:
    ERROR = 10
    INFO = 20
    DETAILED = 30
    VERBOSE = 40
    L0 = 10
    L1 = 20
    L2 = 30


class Recording:
    """What the switch turned on: the level and domains recorded, and where rows go."""

    def __init__(
        self, level: int, domains: Optional[FrozenSet[str]], store: ServiceStore, on_step: Callable[[], None]
    ) -> None:
        self.level = level
        self.domains = domains
        self.store = store
        self.on_step = on_step


_active: Optional[Recording] = None


def attach(recording: Optional[Recording]) -> None:
    """The switch's on (a recording) and off (None)."""
    global _active
    _active = recording


# A forked child (a worker started with fork) inherits the recording but not the store's thread: it must
# not queue rows nobody writes.
os.register_at_fork(after_in_child=lambda: attach(None))


def prof_step() -> None:
    """MindIE's step mark, counted toward ``profiler_step_num``."""
    recording = _active
    if recording is not None:
        recording.on_step()


class Profiler:
    __slots__ = ("_attrs", "_domain", "_metrics", "_name", "_recording", "_rid", "_scope", "_start_ns")

    def __init__(self, level: int = Level.INFO) -> None:
        recording = _active
        if recording is None or recording.level < level:
            self._recording: Optional[Recording] = None
            return  # disabled: nothing else is read, so nothing else is set
        self._recording = recording
        self._domain = ""
        self._rid: Any = ""
        self._attrs: Optional[Dict[str, Any]] = None
        self._metrics: List[Tuple[str, Any, str]] = []
        self._scope = ""
        self._name = ""
        self._start_ns = 0

    def is_enable(self) -> bool:
        return self._recording is not None

    # --- builders ---------------------------------------------------------------------------------

    def domain(self, name: str) -> Profiler:
        recording = self._recording
        if recording is not None:
            if recording.domains is not None and name not in recording.domains:
                self._recording = None
            self._domain = name
        return self

    def res(self, rid: Any) -> Profiler:
        if self._recording is not None:
            self._rid = rid
        return self

    def attr(self, key: str, value: Any) -> Profiler:
        if self._recording is not None:
            if self._attrs is None:
                self._attrs = {}
            self._attrs[key] = value
        return self

    def metric(self, name: str, value: Any) -> Profiler:
        if self._recording is not None:
            self._metrics.append((name, value, "set"))
        return self

    def metric_inc(self, name: str, value: Any) -> Profiler:
        if self._recording is not None:
            self._metrics.append((name, value, "inc"))
        return self

    def metric_scope(self, scope: str, value: Any = 0) -> Profiler:
        if self._recording is not None:
            self._scope = scope
        return self

    def metric_scope_as_req_id(self) -> Profiler:
        return self.metric_scope("req")

    # --- what records -----------------------------------------------------------------------------

    def event(self, name: str) -> None:
        recording = self._recording
        if recording is None:
            return
        now = time.time_ns()
        tid = threading.get_ident()
        recording.store.put(("events", name, self._domain, now, tid, self._rid, self._attrs))
        self._put_metrics(recording, now, tid)
        if name in STEP_NAMES:
            recording.on_step()

    def span_start(self, name: str) -> Profiler:
        if self._recording is not None:
            self._name, self._start_ns = name, time.time_ns()
        return self

    def span_end(self) -> None:
        recording = self._recording
        if recording is None or not self._start_ns:
            return
        now = time.time_ns()
        tid = threading.get_ident()
        recording.store.put(
            ("spans", self._name, self._domain, self._start_ns, now, tid, self._rid, self._attrs)
        )
        self._put_metrics(recording, now, tid)
        self._start_ns = 0
        if self._name in STEP_NAMES:
            recording.on_step()

    def __enter__(self) -> Profiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.span_end()

    def launch(self) -> None:
        """The metrics accumulated so far, as a "Launch" event."""
        self.event("Launch")

    def link(self, from_rid: Any, to_rid: Any) -> None:
        recording = self._recording
        if recording is not None:
            recording.store.put(("links", from_rid, to_rid, self._domain, time.time_ns()))

    def add_meta_info(self, key: str, value: Any) -> None:
        recording = self._recording
        if recording is not None:
            recording.store.put(("meta", key, value, time.time_ns()))

    def _put_metrics(self, recording: Recording, now: int, tid: int) -> None:
        for name, value, kind in self._metrics:
            recording.store.put(
                ("metrics", name, self._domain, now, tid, self._rid, value, kind, self._scope)
            )
