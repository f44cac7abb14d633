"""Detection per (process, kind, device, name) from npu-monitor reports: slowdowns and stragglers.

The figure judged is each reported name's time per call in the interval (``total_ns / count``), not its
total: the torch backend samples a window of varying length per interval, and the number of calls
per step of a training loop is constant, so the time per call moves exactly as the name's time per
step does.

Only names that carry time are judged: at least ``min_share`` of their kind's time on their device in
the interval, and ``min_total_ns``. A name with a sliver of the step is the noisiest (a single
preempted call moves its mean) and the least worth a trace; judging dozens of them would also turn
rare noise in each into frequent alarms for the process.

* **slowdown**: slower than the name's own baseline (:mod:`.baseline`), with the *pace* factored
  out: the median, over the kind's judged names on that device (over all the process's judged names
  when the kind has fewer than three), of each one's time against its baseline.
  When the whole process is slowed (a busy host, a throttled device), every name moves together and
  none is singled out; one operator slowing down moves its own ratio, not the median. A slow process
  as a whole is what the straggler rule, and Prometheus across nodes, are for.
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
from msmonitor_plugin.monitor.report import KindStat, Report

from .baseline import Rule, Series, Streak, middle

SLOWDOWN = "slowdown"
STRAGGLER = "straggler"
MIN_NAMES_FOR_PACE = 3  # fewer judged names: one slowed name would move the median itself


class Key(NamedTuple):
    """What is judged."""

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
    min_share: float = 0.02

    def rule(self, slowdown: float, for_intervals: int) -> Rule:
        return Rule(slowdown, for_intervals, self.window, self.min_samples, self.noise_k)


@dataclass(frozen=True)
class Figure:
    name: str
    baseline_ns: float
    current_ns: float


@dataclass(frozen=True)
class Finding:
    """One key judged slow in one report; *pace*: how much slower the kind's names ran as a whole."""

    key: Key
    detection: str
    baseline_ns: float
    current_ns: float
    intervals: int
    pace: float = 1.0

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


GroupKey = Tuple[str, int]  # (kind label, device)


@dataclass
class _Group:
    """One kind on one device of one process: its names' baselines, and their streaks against the peers."""

    names: Dict[str, Series] = field(default_factory=dict)
    against_peers: Dict[str, Streak] = field(default_factory=dict)

    def medians(self) -> Dict[str, float]:
        return {name: s.reference.median for name, s in self.names.items() if s.reference is not None}


@dataclass
class _Process:
    who: Who
    groups: Dict[GroupKey, _Group] = field(default_factory=dict)
    latest: Dict[GroupKey, Dict[str, float]] = field(default_factory=dict)  # its last judged report's
    latest_end_ns: int = 0  # of its last judged report; 0: not a peer


def judged(ks: KindStat, settings: Settings, group: _Group) -> Tuple[Dict[str, float], List[float]]:
    """The time per call of the names of *ks* that carry time, and their times against their baselines
    for those that have one (one pass: this runs for every report)."""
    floor = max(settings.min_total_ns, settings.min_share * ks.total_ns)
    marker = ks.kind == Kind.MARKER
    names = group.names
    values: Dict[str, float] = {}
    ratios: List[float] = []
    for n in ks.top:  # ranked by total time, the largest first
        if n.total_ns < floor:
            break
        if not n.count:
            continue
        name = f"{n.domain}/{n.name}" if marker else n.name
        value = values[name] = n.total_ns / n.count
        series = names.get(name)
        if series is not None and series.reference is not None and series.reference.median > 0:
            ratios.append(value / series.reference.median)
    return values, ratios


class Detector:
    def __init__(self, settings: Settings = Settings()) -> None:
        self.settings = settings
        self._processes: Dict[int, _Process] = {}
        self._rules: Dict[Tuple[float, int], Rule] = {}

    def _rule(self, slowdown: float, for_intervals: int) -> Rule:
        """One Rule object per threshold: a baseline recomputes its limit when handed another."""
        rule = self._rules.get((slowdown, for_intervals))
        if rule is None:
            rule = self._rules[(slowdown, for_intervals)] = self.settings.rule(slowdown, for_intervals)
        return rule

    def observe(self, who: Who, report: Report, slowdown: float, for_intervals: int) -> Optional[Detection]:
        process = self._processes.get(who.host_pid)
        if process is None:
            process = self._processes[who.host_pid] = _Process(who)
        process.who = who
        if report.final:
            process.latest_end_ns = 0
            return None
        if report.seq <= self.settings.warmup:
            return None
        rule = self._rule(slowdown, for_intervals)
        peers = self._peers(process, report)
        process.latest_end_ns, process.latest = report.end_ns, {}
        judging = []
        for ks in report.kinds:
            where = (ks.kind.label, ks.device)
            group = process.groups.get(where)
            if group is None:
                group = process.groups[where] = _Group()
            values, ratios = judged(ks, self.settings, group)
            process.latest[where] = values
            judging.append((where, group, values, ratios))
        process_pace = _pace([r for *_, ratios in judging for r in ratios])
        findings: List[Finding] = []
        for where, group, values, ratios in judging:
            pace = _pace(ratios) if len(ratios) >= MIN_NAMES_FOR_PACE else process_pace
            findings += _slowdowns(where, group, values, pace, rule)
            peer_values = [p.latest[where] for p in peers if where in p.latest]
            if peer_values:
                findings += _stragglers(where, group, values, peer_values, rule)
        if not findings:
            return None
        findings.sort(key=lambda f: f.ratio, reverse=True)
        return Detection(who, report.seq, tuple(findings), self._figures(process, findings[0], peers))

    def forget(self, host_pid: int) -> None:
        self._processes.pop(host_pid, None)

    def _peers(self, process: _Process, report: Report) -> List[_Process]:
        """The other ranks of the job whose latest report is of this period."""
        period = max(report.end_ns - report.start_ns, 1)
        return [
            p
            for p in self._processes.values()
            if p is not process
            and p.who.job_id == process.who.job_id
            and p.latest_end_ns
            and abs(p.latest_end_ns - report.end_ns) <= period
        ]

    def _figures(self, process: _Process, worst: Finding, peers: List[_Process]) -> Tuple[Figure, ...]:
        where = (worst.key.kind, worst.key.device)
        if worst.detection == STRAGGLER:
            reference = _peer_medians([p.latest[where] for p in peers if where in p.latest])
        else:
            reference = process.groups[where].medians()
        ranked = sorted(process.latest[where].items(), key=lambda kv: -kv[1])
        return tuple(Figure(name, reference[name], value) for name, value in ranked if name in reference)


def _pace(ratios: List[float]) -> float:
    """How much slower names ran as a whole; never below 1, so that no name is judged harsher than on
    its own when everything else got faster."""
    return max(1.0, middle(sorted(ratios))) if len(ratios) >= MIN_NAMES_FOR_PACE else 1.0


def _slowdowns(
    where: GroupKey, group: _Group, values: Dict[str, float], pace: float, rule: Rule
) -> List[Finding]:
    findings = []
    names = group.names
    for name, value in values.items():
        series = names.get(name)
        if series is None:
            series = names[name] = Series(rule.window)
        alarm = series.observe(value / pace, rule)
        if alarm is not None:
            key = Key(where[0], where[1], name)
            findings.append(Finding(key, SLOWDOWN, alarm.reference.median, value, alarm.intervals, pace))
    return findings


def _stragglers(
    where: GroupKey, group: _Group, values: Dict[str, float], peer_values: List[Dict[str, float]], rule: Rule
) -> List[Finding]:
    peers = _peer_medians(peer_values)
    findings = []
    for name, value in values.items():
        peer = peers.get(name)
        streak = group.against_peers.get(name)
        if streak is None:
            streak = group.against_peers[name] = Streak()
        if streak.update(peer is not None and value > peer * (1 + rule.slowdown), rule) and peer is not None:
            findings.append(Finding(Key(where[0], where[1], name), STRAGGLER, peer, value, streak.count))
    return findings


def _peer_medians(peer_values: List[Dict[str, float]]) -> Dict[str, float]:
    names = {name for values in peer_values for name in values}
    return {name: statistics.median(v[name] for v in peer_values if name in v) for name in names}
