"""Where the daemon sends monitor reports: TensorBoard, Prometheus, a rotating JSONL file.

Each sink is a class with ``emit(process, report)`` and ``close()`` (and ``forget(process)`` when it keeps
per-process state); :class:`Sinks` fans a report out to all of them, so that one failing sink never
stops the others. Sinks take plain typed arguments — a :class:`ProcessLabels` and the plugin's
:class:`~msmonitor_contract.report.Report` — and know nothing of the registry.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Protocol, Sequence

from msmonitor_contract.report import Report

from ...core.drops import Drops

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessLabels:
    """Who sent a report: the labels every sink attaches to it."""

    host: str
    job: str
    rank: int
    pid: int

    @property
    def rank_label(self) -> str:
        """The rank, or ``pid<N>`` for a process without one, so that two such processes never collide."""
        return str(self.rank) if self.rank >= 0 else f"pid{self.pid}"


@dataclass(frozen=True)
class Mark:
    """An event at one report of a process (an incident): sinks that can show it do (``mark``)."""

    step: int  # the report's sequence number
    walltime: float
    device: int
    tag: str
    value: float
    text: str


class Sink(Protocol):
    def emit(self, process: ProcessLabels, report: Report) -> None: ...

    def close(self) -> None: ...


class Sinks:
    """All configured sinks as one; errors are logged and counted per sink, never raised."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)
        self.errors: Dict[str, int] = {}
        # Reports each sink took without an error: beside the drops, this says that none went unseen.
        self.delivered: Dict[str, int] = {}

    def emit(self, process: ProcessLabels, report: Report) -> None:
        for sink in self.sinks:
            if self._guard(sink, "emit", lambda s=sink: s.emit(process, report)):
                name = type(sink).__name__
                self.delivered[name] = self.delivered.get(name, 0) + 1

    def forget(self, process: ProcessLabels) -> None:
        """The process left: sinks that keep per-process state drop it."""
        for sink in self.sinks:
            forget = getattr(sink, "forget", None)
            if forget is not None:
                self._guard(sink, "forget", lambda f=forget: f(process))

    def mark(self, process: ProcessLabels, mark: Mark) -> None:
        for sink in self.sinks:
            method = getattr(sink, "mark", None)
            if method is not None:
                self._guard(sink, "mark", lambda m=method: m(process, mark))

    def close(self) -> None:
        for sink in self.sinks:
            self._guard(sink, "close", sink.close)

    def _guard(self, sink: Sink, what: str, action: object) -> bool:
        name = type(sink).__name__
        try:
            action()  # type: ignore[operator]
            return True
        except Exception:
            self.errors[name] = self.errors.get(name, 0) + 1
            log.exception("%s.%s failed", name, what)
            return False


class SinkWorker:
    """The sinks, run on a thread of their own so that writing never delays the event loop (IPC and
    gRPC). Reports wait in a bounded queue; when the sinks fall behind, the oldest waiting report is
    dropped and counted (``sink_queue``), never the daemon's time."""

    def __init__(self, sinks: Sinks, drops: Drops, capacity: int = 1024) -> None:
        self.sinks = sinks
        self._drops = drops
        drops.source(lambda: {f"sink_error:{name}": n for name, n in sinks.errors.items()})
        self._queue: queue.Queue[Optional[Callable[[], None]]] = queue.Queue(capacity)
        self._thread = threading.Thread(target=self._run, name="dynolog-sinks", daemon=True)
        self._thread.start()

    def emit(self, process: ProcessLabels, report: Report) -> None:
        self._put(lambda: self.sinks.emit(process, report))

    def forget(self, process: ProcessLabels) -> None:
        self._put(lambda: self.sinks.forget(process))

    def mark(self, process: ProcessLabels, mark: Mark) -> None:
        self._put(lambda: self.sinks.mark(process, mark))

    def close(self) -> None:
        """Write what is queued, then close every sink."""
        self._queue.put(None)
        self._thread.join(timeout=30)
        self.sinks.close()

    def _put(self, work: Callable[[], None]) -> None:
        while True:
            try:
                self._queue.put_nowait(work)
                return
            except queue.Full:
                with contextlib.suppress(queue.Empty):
                    self._queue.get_nowait()
                    self._drops.add("sink_queue")

    def _run(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            work()


__all__ = ["Mark", "ProcessLabels", "Sink", "SinkWorker", "Sinks"]
