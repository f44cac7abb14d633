"""Detection per (process, kind, device, name) from npu-monitor reports: slowdowns and stragglers.

The figure judged is each reported name's time per call in the interval (``total_ns / count``), not its
total: the torch backend samples a window of varying length per interval, and the number of calls
per step of a training loop is constant, so the time per call moves exactly as the name's time per
step does. Names below ``min_total_ns`` in an interval are too short to judge against noise.

* **slowdown**: slower than the name's own baseline (:mod:`.baseline`).
* **straggler**: slower than the median of the same name in the other ranks of the same job on this
  node (their latest reports, of the same period), ``for_intervals`` in a row.

The first ``warmup`` reports of each monitoring session (the engine numbers them from 1) are not
judged: caches, allocators and the profiler itself settle then. A final report covers a partial
interval: not judged either, and the process stops counting as a peer.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Tuple

from msmonitor_plugin.monitor.records import Kind
from msmonitor_plugin.monitor.report import Report

from .baseline import Reference, Rule, Series, Streak

SLOWDOWN = "slowdown"
STRAGGLER = "straggler"


class Key(NamedTuple):
    """What is judged. A tuple: the detector makes one per name and report, so it must hash in C."""

    kind: str
    device: int
    name: str  # markers: domain/name

    def __str__(self) -> str:
        where = "host" if self.device < 0 else f"device {self.device}"
        return f"{self.kind} {self.name} ({where})"


@dataclass(frozen=True)
class Who:
    host_pid: int
    pid: int
    rank: int
    job_id: int
    hostname: str


@dataclass(frozen=True)
class Settings:
    """The daemon's detection flags (config.py states their defaults)."""

    window: int = 30
    warmup: int = 2
    min_samples: int = 5
    noise_k: float = 3.0
    min_total_ns: int = 50_000

    def rule(self, slowdown: float, for_intervals: int) -> Rule:
        return Rule(slowdown, for_intervals, self.window, self.min_samples, self.noise_k)


@dataclass(frozen=True)
class Figure:
    name: str
    baseline_ns: float
    current_ns: float


@dataclass(frozen=True)
class Finding:
    """One key judged slow in one report."""

    key: Key
    detection: str
    baseline_ns: float
    current_ns: float
    intervals: int

    @property
    def ratio(self) -> float:
        return self.current_ns / self.baseline_ns if self.baseline_ns > 0 else float("inf")


@dataclass(frozen=True)
class Detection:
    """What one report of one process raised: its findings, the worst first, and the figures of the
    worst one's kind (baseline against now, per name)."""

    who: Who
    report_seq: int
    findings: Tuple[Finding, ...]
    figures: Tuple[Figure, ...]

    @property
    def primary(self) -> Finding:
        return self.findings[0]


def per_call(report: Report, min_total_ns: int) -> Dict[Key, float]:
    out: Dict[Key, float] = {}
    for ks in report.kinds:
        kind, device, marker = ks.kind.label, ks.device, ks.kind == Kind.MARKER
        for n in ks.top:
            if n.count and n.total_ns >= min_total_ns:
                name = f"{n.domain}/{n.name}" if marker else n.name
                out[Key(kind, device, name)] = n.total_ns / n.count
    return out


@dataclass
class _Name:
    """One name of one process: its own baseline, and its streak against the peers."""

    series: Series
    against_peers: Streak = field(default_factory=Streak)


@dataclass
class _Process:
    who: Who
    names: Dict[Key, _Name] = field(default_factory=dict)
    latest: Dict[Key, float] = field(default_factory=dict)  # the last judged report's figures
    latest_end_ns: int = 0


class Detector:
    def __init__(self, settings: Settings = Settings()) -> None:
        self.settings = settings
        self._processes: Dict[int, _Process] = {}

    def observe(self, who: Who, report: Report, slowdown: float, for_intervals: int) -> Optional[Detection]:
        process = self._processes.setdefault(who.host_pid, _Process(who))
        process.who = who
        if report.final:
            process.latest = {}
            return None
        if report.seq <= self.settings.warmup:
            return None
        rule = self.settings.rule(slowdown, for_intervals)
        values = per_call(report, self.settings.min_total_ns)
        process.latest, process.latest_end_ns = values, report.end_ns
        findings = self._slowdowns(process, values, rule)
        peers = self._peer_medians(process, report)
        if peers:
            findings += self._stragglers(process, values, peers, rule)
        if not findings:
            return None
        findings.sort(key=lambda f: f.ratio, reverse=True)
        worst = findings[0].key
        reference = peers if findings[0].detection == STRAGGLER else _medians(process.names, rule)
        figures = tuple(
            Figure(k.name, reference[k], v)
            for k, v in sorted(values.items(), key=lambda kv: -kv[1])
            if (k.kind, k.device) == (worst.kind, worst.device) and k in reference
        )
        return Detection(who, report.seq, tuple(findings), figures)

    def forget(self, host_pid: int) -> None:
        self._processes.pop(host_pid, None)

    def _peer_medians(self, process: _Process, report: Report) -> Dict[Key, float]:
        """Per key, the median of the other ranks of the job whose latest report is of this period."""
        period = max(report.end_ns - report.start_ns, 1)
        peers = [
            p.latest
            for p in self._processes.values()
            if p is not process
            and p.who.job_id == process.who.job_id
            and abs(p.latest_end_ns - report.end_ns) <= period
        ]
        keys = {k for latest in peers for k in latest}
        return {k: statistics.median(p[k] for p in peers if k in p) for k in keys}

    def _slowdowns(self, process: _Process, values: Dict[Key, float], rule: Rule) -> List[Finding]:
        findings = []
        names = process.names
        for key, value in values.items():
            state = names.get(key)
            if state is None:
                state = names[key] = _Name(Series(rule.window))
            alarm = state.series.observe(value, rule)
            if alarm is not None:
                findings.append(Finding(key, SLOWDOWN, alarm.reference.median, value, alarm.intervals))
        return findings

    def _stragglers(
        self, process: _Process, values: Dict[Key, float], peers: Dict[Key, float], rule: Rule
    ) -> List[Finding]:
        findings = []
        for key, value in values.items():
            peer = peers.get(key)
            slow = peer is not None and value > peer * (1 + rule.slowdown)
            streak = process.names[key].against_peers
            if streak.update(slow, rule) and peer is not None:
                findings.append(Finding(key, STRAGGLER, peer, value, streak.count))
        return findings


def _medians(names: Dict[Key, _Name], rule: Rule) -> Dict[Key, float]:
    references = {k: n.series.reference(rule) for k, n in names.items()}
    return {k: r.median for k, r in references.items() if isinstance(r, Reference)}
