"""Prometheus exposition of the monitor reports (``--prometheus-address``, ``--prometheus-port``), in
TLS and behind basic auth as ``--prometheus-web-config`` says (:mod:`.web_config`, :mod:`.web_server`).

Every series carries the labels ``host``, ``job``, ``rank`` (``pid<N>`` for a process without a rank),
``device`` (``-1``: host) and ``kind``:

=========================================  =======  ==============================================
metric                                     type     value
=========================================  =======  ==============================================
``msmonitor_records_total``                counter  records observed since the process registered
``msmonitor_duration_seconds_total``       counter  their summed duration
``msmonitor_interval_records``             gauge    records in the last report's interval
``msmonitor_interval_duration_seconds``    gauge    their summed duration
``msmonitor_interval_mean_seconds``        gauge    mean duration in the last interval
``msmonitor_interval_max_seconds``         gauge    longest duration in the last interval
``msmonitor_top_duration_seconds``         gauge    + ``name``: summed duration of one of the top N
                                                    names of the last interval
``msmonitor_top_records``                  gauge    + ``name``: its record count
``msmonitor_dropped_total``                counter  ``host, job, rank, reason``: records lost
``msmonitor_report_timestamp_seconds``     gauge    ``host, job, rank``: end of the last interval
``msmonitor_interval_sampled_ratio``       gauge    ``host, job, rank``: the part of the last interval
                                                    observed (1; less with the torch backend, whose
                                                    interval figures are its sampling window's)
``dynolog_dropped_total``                  counter  ``where``: what the daemon itself dropped
``dynolog_monitor_reports_total``          counter  ``stage``: reports the daemon received whole
                                                    (``received``), handed to watch streams
                                                    (``watch``, one per stream) and each sink took
                                                    (``sink:<Sink>``)
``dynolog_incidents_total``                counter  ``kind, traced``: incidents npu-monitor's
                                                    ``--auto-trace`` raised (``traced="false"``:
                                                    the rate limit kept it from a trace)
=========================================  =======  ==============================================

Names are limited to the top N (default 10) of the last report to bound cardinality; marker names are
``<domain>/<name>``. A process's series disappear when it is forgotten (it left the daemon).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from msmonitor_contract.activity import Kind
from msmonitor_contract.report import Report

from . import ProcessLabels
from .web_config import WebConfig
from .web_server import BasicAuth, serve

LABELS = ["host", "job", "rank", "device", "kind"]
PROCESS_LABELS = ["host", "job", "rank"]
NS = 1e-9


@dataclass
class _Process:
    labels: ProcessLabels
    last: Optional[Report] = None
    records: Dict[Tuple[int, str], int] = field(default_factory=dict)  # (device, kind) -> cumulative
    duration_ns: Dict[Tuple[int, str], int] = field(default_factory=dict)
    dropped: Dict[str, int] = field(default_factory=dict)


class _ReportCollector(Collector):
    def __init__(self, sink: PrometheusSink) -> None:
        self.sink = sink

    def collect(self) -> Iterable[Metric]:
        with self.sink._lock:
            processes = list(self.sink._processes.values())
        families = _families(processes, self.sink.top_n)
        if self.sink.daemon_drops is not None:
            dropped = CounterMetricFamily(
                "dynolog_dropped", "What the daemon dropped, by where", labels=["where"]
            )
            for where, n in sorted(self.sink.daemon_drops().items()):
                dropped.add_metric([where], n)
            families.append(dropped)
        if self.sink.daemon_reports is not None:
            reports = CounterMetricFamily(
                "dynolog_monitor_reports",
                "Monitor reports received, and taken by each destination",
                labels=["stage"],
            )
            for stage, n in sorted(self.sink.daemon_reports().items()):
                reports.add_metric([stage], n)
            families.append(reports)
        counts = self.sink.daemon_incidents() if self.sink.daemon_incidents is not None else {}
        if counts:  # no family before the first incident: nothing to say, and no series without samples
            incidents = CounterMetricFamily(
                "dynolog_incidents",
                "Incidents --auto-trace raised, by kind and traced",
                labels=["kind", "traced"],
            )
            for (kind, traced), n in sorted(counts.items()):
                incidents.add_metric([kind, traced], n)
            families.append(incidents)
        return families


def _families(processes: List[_Process], top_n: int) -> List[Metric]:
    records = CounterMetricFamily("msmonitor_records", "Records observed", labels=LABELS)
    duration = CounterMetricFamily("msmonitor_duration_seconds", "Summed record duration", labels=LABELS)
    interval_records = GaugeMetricFamily(
        "msmonitor_interval_records", "Records in the last interval", labels=LABELS
    )
    interval_duration = GaugeMetricFamily(
        "msmonitor_interval_duration_seconds", "Summed duration in the last interval", labels=LABELS
    )
    mean = GaugeMetricFamily(
        "msmonitor_interval_mean_seconds", "Mean duration in the last interval", labels=LABELS
    )
    longest = GaugeMetricFamily(
        "msmonitor_interval_max_seconds", "Longest duration in the last interval", labels=LABELS
    )
    top_duration = GaugeMetricFamily(
        "msmonitor_top_duration_seconds", "Summed duration of a top name", labels=[*LABELS, "name"]
    )
    top_records = GaugeMetricFamily(
        "msmonitor_top_records", "Records of a top name", labels=[*LABELS, "name"]
    )
    dropped = CounterMetricFamily("msmonitor_dropped", "Records lost", labels=[*PROCESS_LABELS, "reason"])
    stamp = GaugeMetricFamily(
        "msmonitor_report_timestamp_seconds", "End of the last interval", labels=PROCESS_LABELS
    )
    sampled = GaugeMetricFamily(
        "msmonitor_interval_sampled_ratio", "Part of the last interval observed", labels=PROCESS_LABELS
    )
    for p in processes:
        who = [p.labels.host, p.labels.job, p.labels.rank_label]
        for (device, kind), count in sorted(p.records.items()):
            records.add_metric([*who, str(device), kind], count)
            duration.add_metric([*who, str(device), kind], p.duration_ns[(device, kind)] * NS)
        for reason, count in sorted(p.dropped.items()):
            dropped.add_metric([*who, reason], count)
        if p.last is None:
            continue
        stamp.add_metric(who, p.last.end_ns * NS)
        sampled.add_metric(who, p.last.sampled_fraction)
        for ks in p.last.kinds:
            labels = [*who, str(ks.device), ks.kind.label]
            interval_records.add_metric(labels, ks.count)
            interval_duration.add_metric(labels, ks.total_ns * NS)
            mean.add_metric(labels, ks.mean_ns * NS)
            longest.add_metric(labels, ks.max_ns * NS)
            for name in ks.top[:top_n]:
                key = f"{name.domain}/{name.name}" if ks.kind == Kind.MARKER else name.name
                top_duration.add_metric([*labels, key], name.total_ns * NS)
                top_records.add_metric([*labels, key], name.count)
    return [records, duration, interval_records, interval_duration, mean, longest, top_duration, top_records,
            dropped, stamp, sampled]  # fmt: skip


class PrometheusSink:
    """Keeps each process's latest report and running totals; serves them on *address*:*port*, with the
    TLS and users of *web* (None: plain HTTP, to anyone who can connect).

    ``port=None`` serves nothing (for embedding the registry elsewhere); ``port=0`` picks a free port
    (see :attr:`port`).
    """

    def __init__(
        self,
        address: str = "127.0.0.1",
        port: Optional[int] = 9464,
        top_n: int = 10,
        web: Optional[WebConfig] = None,
    ) -> None:
        self.top_n = top_n
        self.daemon_drops: Optional[Callable[[], Dict[str, int]]] = None  # the daemon's own drop counts
        self.daemon_reports: Optional[Callable[[], Dict[str, int]]] = None  # and where reports went
        self.daemon_incidents: Optional[Callable[[], Dict[Tuple[str, str], int]]] = None  # (kind, traced)
        self.registry = CollectorRegistry(auto_describe=False)
        self._lock = threading.Lock()
        self._processes: Dict[Tuple[str, int], _Process] = {}
        self.registry.register(_ReportCollector(self))
        self._server = None
        self.port = 0
        if port is not None:
            app = make_wsgi_app(self.registry)
            if web is not None and web.users:
                app = BasicAuth(app, web.users)
            self._server, self._thread = serve(address, port, app, web.tls if web is not None else None)
            self.port = self._server.server_port

    def emit(self, process: ProcessLabels, report: Report) -> None:
        with self._lock:
            state = self._processes.setdefault((process.host, process.pid), _Process(process))
            state.labels = process
            state.last = report
            for ks in report.kinds:
                key = (ks.device, ks.kind.label)
                state.records[key] = state.records.get(key, 0) + ks.count
                state.duration_ns[key] = state.duration_ns.get(key, 0) + ks.total_ns
            for reason, count in report.dropped.items():
                state.dropped[reason] = state.dropped.get(reason, 0) + count

    def forget(self, process: ProcessLabels) -> None:
        with self._lock:
            self._processes.pop((process.host, process.pid), None)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)
            self._server = None
