"""The watch over npu-monitor's reports for ``--auto-trace``, and where its incidents and traces go.

:class:`IncidentWatch` is told of every report (``Metrics.report_listeners``). For a process whose
monitor was started with ``--auto-trace``, the :class:`~.detector.Detector` judges the report; what it
raises becomes an :class:`~.incident.Incident`, stored (:mod:`.store`), counted for Prometheus, marked
in TensorBoard, and — within the rate limits — traced by the :class:`~.actions.AutoTracer`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Coroutine, Dict, List, Mapping, NamedTuple, Optional, Set, Tuple

from msmonitor_contract.report import Report

from ..config import DaemonConfig, user_state_dir
from ..core.pipeline import CommandPipeline
from ..core.registry import ProcessRecord
from ..core.traces import TraceStore
from ..kinds.npumonitor import AutoTraceRule, NpuMonitor, NpuMonitorCommand
from ..kinds.nputrace import NpuTrace
from ..monitoring.metrics import Metrics
from ..monitoring.sinks import Mark
from .actions import AutoTracer, rate_limit
from .detector import Detection, Detector, Settings, Who
from .incident import TRACING, Incident
from .store import IncidentStore

log = logging.getLogger("dynolog.incidents")

STORE_NAME = "dynolog_incidents.sqlite"


@dataclass(frozen=True)
class IncidentSettings:
    """Where incidents and their traces go, and the detector's flags."""

    store_path: str = ":memory:"
    trace_dir: Path = Path("traces")
    detector: Settings = field(default_factory=Settings)

    @classmethod
    def beside(cls, log_file: Path, trace_dir: Optional[Path], detector: Settings) -> IncidentSettings:
        """The SQLite file beside the log; the traces in *trace_dir*, else in :func:`default_trace_dir`."""
        traces = trace_dir or default_trace_dir(log_file, os.geteuid(), os.environ)
        return cls(str(log_file.parent / STORE_NAME), traces, detector)


_SYSTEM_LOGS = Path("/var/log")


def default_trace_dir(log_file: Path, euid: int, environ: Mapping[str, str]) -> Path:
    """Traces are data, not logs: with the log under /var/log they go to the daemon's state folder, the
    unit's ``StateDirectory=`` (``$STATE_DIRECTORY``), else /var/lib/dynolog for root, else this user's
    (XDG); a log anywhere else (the user's state folder, a test's) keeps them beside it."""
    folder = log_file.parent
    if _SYSTEM_LOGS not in (folder, *folder.parents):
        return folder / "traces"
    if environ.get("STATE_DIRECTORY"):  # systemd may list several, colon-separated
        return Path(environ["STATE_DIRECTORY"].split(":")[0]) / "traces"
    return (Path("/var/lib/dynolog") if euid == 0 else user_state_dir(environ)) / "traces"


def incident_settings(config: DaemonConfig) -> IncidentSettings:
    detector = config.detector_settings()
    return IncidentSettings.beside(config.log_file or Path("dynolog.log"), config.auto_trace_dir, detector)


class TraceParts(NamedTuple):
    """The node's parts an auto-trace runs on: the pipeline, the monitor it stops and resumes, the trace
    it starts, and the store that follows that trace."""

    pipeline: CommandPipeline
    npumonitor: NpuMonitor
    nputrace: NpuTrace
    traces: TraceStore


class IncidentWatch:
    def __init__(self, settings: IncidentSettings, parts: TraceParts, metrics: Metrics) -> None:
        self.store = IncidentStore(settings.store_path)
        self.detector = Detector(settings.detector)
        self._npumonitor = parts.npumonitor
        self._metrics = metrics
        self._tracer = AutoTracer(*parts, self.store, settings.trace_dir)
        self._hostname = socket.gethostname()
        self._tasks: Set[asyncio.Task[None]] = set()
        self._counts: Dict[Tuple[str, str], int] = {}  # (kind, traced) -> incidents, for Prometheus
        # Auto-traces a previous daemon stopped the monitor for and never resumed: resumed when their
        # process says hello again.
        self._interrupted: Dict[int, Incident] = {}
        for incident in self.store.list():
            self._count(incident.kind, rate_limited=not incident.traced)
            if incident.resume:
                self._interrupted[incident.host_pid] = incident

    def report(self, record: ProcessRecord, report: Report) -> None:
        monitor = self._npumonitor.settings.get(record.host_pid)
        if monitor is None or monitor.auto_trace is None:
            return  # detection off: nothing is kept for this process
        who = Who(record.host_pid, record.pid, record.rank, record.job_id, record.hostname or self._hostname)
        rule = monitor.auto_trace
        detection = self.detector.observe(who, report, rule.slowdown, rule.for_intervals)
        if detection is not None:
            self._raise(record, report, detection, monitor, rule)

    def hello(self, record: ProcessRecord) -> None:
        """A process registered: if a previous daemon's auto-trace left it stopped, finish that."""
        incident = self._interrupted.pop(record.host_pid, None)
        if incident is None:
            return
        if (incident.pid, incident.job_id, incident.rank) != (record.pid, record.job_id, record.rank):
            incident.resume = ""  # the pid was reused by another process: nothing of ours runs there
            incident.note(f"not resumed: pid {record.host_pid} is now another process")
            self.store.update(incident)
            return
        incident.note("the daemon restarted during this auto-trace; the process is back")
        self._spawn(self._tracer.recover(incident))

    def gone(self, record: ProcessRecord, why: str) -> None:
        self.detector.forget(record.host_pid)

    def counts(self) -> Dict[Tuple[str, str], int]:
        """Incidents by (kind, traced): read by the Prometheus exporter's thread, hence a copy."""
        return dict(self._counts)

    def list(self, job_id: int = 0, limit: int = 0) -> List[Incident]:
        return self.store.list(job_id, limit)

    def get(self, incident_id: int) -> Optional[Incident]:
        return self.store.get(incident_id)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.store.close()

    def _raise(
        self,
        record: ProcessRecord,
        report: Report,
        detection: Detection,
        monitor: NpuMonitorCommand,
        rule: AutoTraceRule,
    ) -> None:
        incident = self.store.add(Incident.of(detection))
        limited = rate_limit(self.store, incident, rule, incident.at)
        incident.action = limited or TRACING
        incident.traced = limited is None  # counts against the limits from now on
        self.store.update(incident)
        self._count(incident.kind, rate_limited=limited is not None)
        log.warning(
            "incident %d on pid %d (rank %d): %s",
            incident.id,
            record.pid,
            record.rank,
            incident.timeline[0][1],
        )
        self._metrics.mark(record, _mark(incident, report))
        if limited is None:
            self._spawn(self._tracer.run(incident, monitor))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _count(self, kind: str, rate_limited: bool) -> None:
        key = (kind, "false" if rate_limited else "true")
        self._counts[key] = self._counts.get(key, 0) + 1


def _mark(incident: Incident, report: Report) -> Mark:
    return Mark(
        step=report.seq,
        walltime=report.end_ns / 1e9,
        device=incident.device,
        tag=f"incident/{incident.kind}",
        value=incident.current_ns / incident.baseline_ns if incident.baseline_ns else 0.0,
        text=f"incident {incident.id}: {incident.timeline[0][1]}; {incident.action}",
    )
