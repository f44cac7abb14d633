"""npu-monitor reports on the daemon: in from processes, on to watchers and sinks.

Every interval a monitoring process sends a report, in chunks, which the daemon reassembles, keeps as
each process's latest, streams to ``WatchMetrics`` and writes to the configured sinks. msMonitor's own
``data`` messages are accepted too.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Callable, Dict, List, Optional, Set, Tuple

from msmonitor_contract import wire
from msmonitor_contract.activity import HOST, Kind
from msmonitor_contract.report import (
    MAX_DEVICE,
    ChunkAssembler,
    KindStat,
    NameStat,
    Report,
    ReportError,
)
from msmonitor_contract.targets import Targets

from ..core import targeting
from ..core.drops import Drops
from ..core.registry import ProcessRecord, Registry
from .sinks import Mark, ProcessLabels, Sinks, SinkWorker
from .sinks.prometheus import PrometheusSink

MAX_PARTIAL_REPORTS = 4  # reports of one process being reassembled at once

Watched = Tuple[ProcessRecord, Report]  # a report, and the process it came from


def labels_of(record: ProcessRecord, hostname: str) -> ProcessLabels:
    return ProcessLabels(
        host=record.hostname or hostname, job=str(record.job_id), rank=record.rank, pid=record.pid
    )


class Metrics:
    def __init__(self, registry: Registry, drops: Drops, sinks: Optional[Sinks] = None) -> None:
        self.registry = registry
        self._drops = drops
        self._sinks = SinkWorker(sinks or Sinks([]), drops)
        self.hostname = socket.gethostname()
        self._latest: Dict[int, Watched] = {}  # host pid -> its latest report
        self._assemblers: Dict[int, ChunkAssembler] = {}  # per host pid: a peer cannot pose as another
        self._watchers: Set[asyncio.Queue[Watched]] = set()
        # Told of every whole report, after the sinks (incident detection).
        self.report_listeners: List[Callable[[ProcessRecord, Report], None]] = []
        drops.source(lambda: {"partial_reports": sum(a.incomplete for a in self._assemblers.values())})
        # Reports received whole, and those handed to watch streams (one per stream); with the sinks'
        # own counts and the drops, every report is accounted for (Prometheus:
        # dynolog_monitor_reports_total{stage}).
        self._received = 0
        self._watched = 0
        for sink in self._sinks.sinks.sinks:
            if isinstance(sink, PrometheusSink):
                sink.daemon_reports = self.report_counts

    # --- what processes tell us -----------------------------------------------------------------

    def chunk(self, record: ProcessRecord, payload: bytes) -> None:
        """One chunk of a report; the report is published when all its parts arrived."""
        assembler = self._assemblers.setdefault(record.host_pid, ChunkAssembler(MAX_PARTIAL_REPORTS))
        try:
            report = assembler.add(payload)
        except (ReportError, KeyError, TypeError, ValueError) as exc:
            raise wire.WireError(f"metrics chunk: {exc!r}") from None
        if report is not None:
            self._publish(record, report)

    def data_message(self, record: ProcessRecord, payload: bytes) -> None:
        """msMonitor's ``data``: one kind's summed duration on one device (markers: per domain and name)."""
        try:
            d = json.loads(payload)
            kind, device, duration, stamp = (
                Kind.parse(d["kind"]),
                int(d["deviceId"]),
                int(d["duration"]),
                int(d["timestamp"]),
            )
            domain = d.get("domain")
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError, AttributeError) as exc:
            raise wire.WireError(f"data message does not parse: {exc!r}") from None
        device = -1 if device >= 2**31 else device  # msMonitor sends the host as an unsigned -1
        # Checked as a report's chunk is: what is kept must fit the gRPC fields that serve it.
        if not (HOST <= device <= MAX_DEVICE and 0 <= duration < 2**64 and -(2**63) <= stamp < 2**63):
            raise wire.WireError(f"data message out of range: device {device}, {duration} ns at {stamp}")
        top = [NameStat(str(d.get("name", kind.label)), 1, duration, None if domain is None else str(domain))]
        stat = KindStat(kind, device, 1, duration, duration, duration, top=top, distinct=1)
        self._publish(record, Report(0, record.pid, "msmonitor", stamp, stamp, 0, kinds=[stat]))

    def forget(self, record: ProcessRecord) -> None:
        self._latest.pop(record.host_pid, None)
        self._assemblers.pop(record.host_pid, None)
        self._sinks.forget(labels_of(record, self.hostname))

    # --- watchers -----------------------------------------------------------------------------------

    def watch(self, targets: Targets, latest: bool) -> asyncio.Queue[Watched]:
        queue: asyncio.Queue[Watched] = asyncio.Queue(maxsize=1000)
        if latest:
            for record in targeting.select(self.registry, targets):
                kept = self._latest.get(record.host_pid)
                if kept is not None:
                    queue.put_nowait(kept)
        self._watchers.add(queue)
        return queue

    def unwatch(self, queue: asyncio.Queue[Watched]) -> None:
        self._watchers.discard(queue)

    def close(self) -> None:
        self._sinks.close()

    def report_counts(self) -> Dict[str, int]:
        """``received`` (whole reports), ``watch`` (handed to watch streams), ``sink:<Sink>`` (written)."""
        counts = {"received": self._received, "watch": self._watched}
        for name, n in dict(self._sinks.sinks.delivered).items():  # a copy: the sink thread adds to it
            counts[f"sink:{name}"] = n
        return counts

    def _publish(self, record: ProcessRecord, report: Report) -> None:
        self._received += 1
        self._latest[record.host_pid] = message = (record, report)
        if self._watchers:
            for queue in list(self._watchers):
                if queue.full():  # a watcher that does not read loses old reports, never the daemon's time
                    queue.get_nowait()
                    self._drops.add("watch_queue")
                queue.put_nowait(message)
                self._watched += 1
        self._sinks.emit(labels_of(record, self.hostname), report)
        for listener in self.report_listeners:
            listener(record, report)

    def mark(self, record: ProcessRecord, mark: Mark) -> None:
        """An event at one of *record*'s reports, for the sinks that show such (TensorBoard)."""
        self._sinks.mark(labels_of(record, self.hostname), mark)
