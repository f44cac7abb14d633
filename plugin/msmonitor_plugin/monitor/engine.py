"""The monitor of one process: the API the plugin's command handler calls.

    monitor = Monitor(rank=3, on_report=send, on_stopped=tell_daemon)
    result = monitor.apply(MonitorConfig.parse(keys))   # an npu-monitor command, msMonitor's semantics
    ...                                                  # on_report(report) every interval
    monitor.stop()                                       # or DURATION expires: on_stopped("duration")

:meth:`Monitor.apply` follows msMonitor's ``DealMonitorReq`` order: stop, interval, start (save directory,
duration, metric or file mode, backend), filter, kinds. Starting while running changes nothing but the
interval, filter, kinds and top N; duration, log directory and export type are honoured only at start.

A monitor thread (``msmonitor-monitor``) runs while monitoring: at each interval it flushes the backend,
takes the interval's :class:`~.report.Report` and calls ``on_report`` (metric mode), and it stops the
monitor when ``DURATION`` expires, then calls ``on_stopped("duration")`` so the daemon learns that the
process is free again. Callbacks run on that thread (``on_stopped("command")`` on the caller's); they
must not block for long, and exceptions they raise are logged and swallowed.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from msmonitor_contract.activity import Kind
from msmonitor_contract.report import Report
from msmonitor_contract.vocabulary import MonitorState

from ..steps import AtNextStep
from .aggregate import Aggregator
from .backends import Backend, Collector, select_backend
from .config import ExportType, MonitorConfig
from .msprof_db import SqliteWriter
from .writers import JsonlWriter, WriterThread, dump_interval_s, queue_capacity, rotation

log = logging.getLogger("msmonitor_plugin")

BackendFactory = Callable[[Mapping[str, str]], Tuple[Backend, List[str]]]


def backends_at_steps(at_next_step: Optional[AtNextStep]) -> BackendFactory:
    """:func:`select_backend` for a process that counts steps: *at_next_step* (StepCounter.once) lets a
    backend act on the training thread (None: no steps counted here)."""
    return functools.partial(select_backend, at_next_step=at_next_step)


class MonitorError(RuntimeError):
    """A start that cannot happen (unusable save directory, MSPTI held by another profiler, …)."""


@dataclass
class ApplyResult:
    """What a command did: the state afterwards, and what the caller should tell the user."""

    state: MonitorState
    backend: str = ""
    unavailable: Dict[str, str] = field(default_factory=dict)  # kind label -> reason
    warnings: List[str] = field(default_factory=list)
    output: str = ""  # log-file mode: the directory written to


class _Session:
    """Everything that exists only while monitoring runs."""

    def __init__(
        self,
        backend: Backend,
        collector: Collector,
        writer: Optional[WriterThread],
        config: MonitorConfig,
        output: str,
    ) -> None:
        self.output = output
        self.backend = backend
        self.collector = collector
        self.writer = writer
        self.config = config
        self.unavailable: Dict[str, str] = {}
        self.interval_start_ns = time.time_ns()
        self.deadline: Optional[float] = None
        self.next_report = 0.0
        self.stopping = False


class Monitor:
    def __init__(
        self,
        *,
        rank: int = -1,
        on_report: Optional[Callable[[Report], None]] = None,
        on_stopped: Optional[Callable[[str], None]] = None,
        env: Mapping[str, str] = os.environ,
        backend_factory: BackendFactory = select_backend,
    ) -> None:
        """*backend_factory*: :func:`select_backend`, given a way to act on the training thread where
        there is one (:func:`backends_at_steps`), or a test's."""
        self.rank = rank
        self.pid = os.getpid()
        self.on_report = on_report
        self.on_stopped = on_stopped
        self.env = env
        self.backend_factory = backend_factory
        self.interval_s = 60
        self._lock = threading.RLock()  # commands and the monitor thread; backends are driven under it
        self._wake = threading.Condition(self._lock)
        self._session: Optional[_Session] = None
        self._thread: Optional[threading.Thread] = None
        self._seq = 0

    @property
    def state(self) -> MonitorState:
        return MonitorState.RUNNING if self._session is not None else MonitorState.IDLE

    @property
    def config(self) -> Optional[MonitorConfig]:
        session = self._session
        return session.config if session is not None else None

    def apply(self, config: MonitorConfig) -> ApplyResult:
        """One npu-monitor command. Raises MonitorError when a requested start cannot happen."""
        if config.stop:
            self.stop("command")
        with self._lock:
            if config.report_interval_s > 0:
                self._set_interval(config.report_interval_s)
            if config.start and self._session is None:
                self._start(config)
            session = self._session
            if session is None:
                return ApplyResult(MonitorState.IDLE, warnings=list(config.warnings))
            if session.config is not config:  # already running: what a running monitor can change
                session.config = _running_update(session.config, config)
            session.collector.filter = config.filter
            session.collector.aggregator.top_n = config.top_n
            unavailable = session.backend.set_kinds(config.kinds)
            session.unavailable = {k.label: reason for k, reason in sorted(unavailable.items())}
            self._wake.notify_all()
            return self._result(session, config)

    def stop(self, reason: str = "command") -> Optional[Report]:
        """Stop monitoring (idempotent); returns the final report (metric mode) and calls on_stopped."""
        with self._lock:
            session = self._session
            if session is None or session.stopping:
                return None
            session.stopping = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        return self._teardown(session, reason)

    def close(self) -> None:
        self.stop("closed")

    # -- starting -----------------------------------------------------------------------------------

    def _start(self, config: MonitorConfig) -> None:
        output = _save_dir(config.log_dir) if config.log_dir else ""
        backend, notes = self.backend_factory(self.env)
        for note in notes:
            log.info("monitor backend: %s", note)
        aggregator = Aggregator(top_n=config.top_n)
        writer = None
        try:
            writer = self._writer(config, output, backend) if output else None  # a full disk, say
            collector = Collector(aggregator, writer, config.filter)
            session = _Session(backend, collector, writer, config, output)
            backend.start(collector, config.kinds)
        except Exception as exc:
            if writer is not None:
                writer.close()
            raise MonitorError(f"monitor could not start ({backend.name}): {exc}") from exc
        now = time.monotonic()
        session.deadline = now + config.duration_s if config.duration_s > 0 else None
        session.next_report = now + self.interval_s
        backend.begin_interval(now, self.interval_s)
        self._session = session
        self._thread = threading.Thread(
            target=self._run, args=(session,), name="msmonitor-monitor", daemon=True
        )
        self._thread.start()

    def _writer(self, config: MonitorConfig, output: str, backend: Backend) -> WriterThread:
        if config.export_type == ExportType.JSONL:
            lines, files = rotation(config.rotate_lines, config.rotate_files, self.env)
            writer: object = JsonlWriter(output, self.pid, self.rank, lines, files)
        else:
            writer = SqliteWriter(output, self.pid, self.rank, backend.name, backend.host_is_device)
        return WriterThread(writer, queue_capacity(self.env), dump_interval_s(self.env))

    def _set_interval(self, interval_s: int) -> None:
        session = self._session
        if session is not None and interval_s != self.interval_s:
            session.next_report += interval_s - self.interval_s  # counted from the last report
        self.interval_s = interval_s

    def _result(self, session: _Session, config: MonitorConfig) -> ApplyResult:
        return ApplyResult(
            state=MonitorState.RUNNING,
            backend=session.backend.name,
            unavailable=dict(session.unavailable),
            warnings=list(config.warnings),
            output=session.output,
        )

    # -- the monitor thread -------------------------------------------------------------------------

    def _run(self, session: _Session) -> None:
        reason = ""
        with self._lock:
            while not session.stopping:
                now = time.monotonic()
                if session.deadline is not None and now >= session.deadline:
                    reason = "duration"
                    session.stopping = True
                    break
                if now >= session.next_report:
                    self._interval_report(session, now)
                wake = session.backend.poll(now)
                self._wake.wait(
                    max(0.0, min(t for t in (session.next_report, session.deadline, wake) if t) - now)
                )
        if reason:
            self._teardown(session, reason)

    def _interval_report(self, session: _Session, now: float) -> None:
        report = self._take_report(session, final=False)
        session.next_report = max(session.next_report + self.interval_s, now)
        session.backend.begin_interval(now, self.interval_s)
        if report is not None:
            self._deliver(report)

    def _take_report(self, session: _Session, final: bool) -> Optional[Report]:
        session.backend.flush()
        sampled = session.backend.take_sampled_ns()
        end_ns = time.time_ns()
        start_ns, session.interval_start_ns = session.interval_start_ns, end_ns
        if session.writer is not None:  # log-file mode: records went to the files, nothing to report
            return None
        self._seq += 1
        return session.collector.aggregator.take(
            seq=self._seq,
            pid=self.pid,
            backend=session.backend.name,
            start_ns=start_ns,
            end_ns=end_ns,
            sampled_ns=sampled,
            unavailable=session.unavailable,
            final=final,
        )

    def _deliver(self, report: Report) -> None:
        if self.on_report is not None:
            try:
                self.on_report(report)
            except Exception:
                log.exception("on_report failed")

    def _teardown(self, session: _Session, reason: str) -> Optional[Report]:
        with self._lock:
            try:
                session.backend.stop()  # delivers what it still holds
            except Exception:
                log.exception("monitor backend did not stop cleanly")
            report = self._take_report(session, final=True)
            if self._session is session:
                self._session = None
                self._thread = None
        if session.writer is not None:
            session.writer.close()
            if session.writer.dropped:
                log.warning("monitor files: %d records dropped (queue full)", session.writer.dropped)
        if report is not None:
            self._deliver(report)
        if self.on_stopped is not None:
            try:
                self.on_stopped(reason)
            except Exception:
                log.exception("on_stopped failed")
        return report


def _replace(config: MonitorConfig, **changes: object) -> MonitorConfig:
    import dataclasses

    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]


def _running_update(current: MonitorConfig, command: MonitorConfig) -> MonitorConfig:
    """A command to a running monitor changes kinds, filter and top N; the rest stays as started."""
    return _replace(current, kinds=command.kinds, filter=command.filter, top_n=command.top_n)


def _save_dir(path: str) -> str:
    """msMonitor's save-path check: absolute, created if missing, a writable directory."""
    directory = os.path.realpath(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise MonitorError(f"cannot create the log directory {directory}: {exc.strerror}") from exc
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK | os.X_OK):
        raise MonitorError(f"the log directory {directory} is not a writable directory")
    return directory


__all__ = ["ApplyResult", "Kind", "Monitor", "MonitorConfig", "MonitorError", "Report"]
