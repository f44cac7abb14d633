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
  out: the lower quartile, over the kind's reported names on that device that have a baseline (over
  all the process's when the kind has fewer than three), of each one's time against its baseline.
  When the whole process is slowed (a busy host, a throttled device), every name moves together and
  none is singled out; one operator slowing down moves its own ratio, not the quartile. Not the
  median: a slowed operator, the operators it calls and a small one preempted by chance are three
  names that move together, a majority of the five a CPU job has. And every name with a baseline
  counts, judged in this interval or not: a slowed operator takes a larger share of the time and
  pushes the others below the share floor, leaving only itself and its callees. A slow process as a
  whole is what the straggler rule, and Prometheus across nodes, are for.
* **straggler**: slower than the median of the same name in the other ranks of the same job on this
  node (their latest reports, of the same period), ``for_intervals`` in a row.

Of the findings of one report, the one that added the most time (per call slower, times its calls)
comes first and names the incident: a small operator inside a slowed one may be slower by a larger
ratio, but it is not where the time went.

The first ``warmup`` reports of each monitoring session (the engine numbers them from 1) are not
judged: caches, allocators and the profiler itself settle then. A final report covers a partial
interval: not judged either, and the process stops counting as a peer.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Tuple

from msmonitor_contract.activity import Kind
from msmonitor_contract.report import KindStat, Report

from .baseline import Rule, Series, Streak

SLOWDOWN = "slowdown"
STRAGGLER = "straggler"
MIN_NAMES_FOR_PACE = 3  # fewer names with a baseline: one slowed name would set the pace itself
PACE_QUANTILE = 0.25


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
    """The detector's parameters; the daemon's --incident-* flags take their defaults from these
    (:meth:`dynolog.config.DaemonConfig.detector_settings` converts the units)."""

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
    calls: int = 1  # in the interval

    @property
    def ratio(self) -> float:
        return self.current_ns / self.baseline_ns if self.baseline_ns > 0 else float("inf")

    @property
    def added_ns(self) -> float:
        """The time the interval spent on this name beyond its reference."""
        return (self.current_ns - self.baseline_ns) * self.calls


@dataclass(frozen=True)
class Detection:
    """What one report of one process raised: its findings, the one that added the most time first,
    and the figures of that one's kind (baseline against now, per name)."""

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


class Judged(NamedTuple):
    """One kind's names in one report, as the detector sees them."""

    values: Dict[str, float]  # time per call of the names that carry time (judged)
    calls: Dict[str, int]  # of those
    ratios: List[float]  # time per call against the baseline, of every reported name that has one


def judged(ks: KindStat, settings: Settings, group: _Group) -> Judged:
    """The names of *ks* to judge, and what the pace is taken from (one pass: this runs for every
    report)."""
    floor = max(settings.min_total_ns, settings.min_share * ks.total_ns)
    marker = ks.kind == Kind.MARKER
    names = group.names
    out = Judged({}, {}, [])
    for n in ks.top:
        if not n.count:
            continue
        name = f"{n.domain}/{n.name}" if marker else n.name
        value = n.total_ns / n.count
        if n.total_ns >= floor:
            out.values[name], out.calls[name] = value, n.count
        series = names.get(name)
        if series is not None and series.reference is not None and series.reference.median > 0:
            out.ratios.append(value / series.reference.median)
    return out


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
            names = judged(ks, self.settings, group)
            process.latest[where] = names.values
            judging.append((where, group, names))
        process_pace = _pace([r for *_, names in judging for r in names.ratios])
        findings: List[Finding] = []
        for where, group, names in judging:
            pace = _pace(names.ratios) if len(names.ratios) >= MIN_NAMES_FOR_PACE else process_pace
            findings += _slowdowns(where, group, names, pace, rule)
            peer_values = [p.latest[where] for p in peers if where in p.latest]
            if peer_values:
                findings += _stragglers(where, group, names, peer_values, rule)
        if not findings:
            return None
        findings.sort(key=lambda f: f.added_ns, reverse=True)
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
    """How much slower names ran as a whole (see the module docstring); never below 1, so that no name
    is judged harsher than on its own when everything else got faster."""
    if len(ratios) < MIN_NAMES_FOR_PACE:
        return 1.0
    ordered = sorted(ratios)
    return max(1.0, ordered[int(PACE_QUANTILE * (len(ordered) - 1))])


def _slowdowns(where: GroupKey, group: _Group, names: Judged, pace: float, rule: Rule) -> List[Finding]:
    findings = []
    baselines = group.names
    for name, value in names.values.items():
        series = baselines.get(name)
        if series is None:
            series = baselines[name] = Series(rule.window)
        alarm = series.observe(value / pace, rule)
        if alarm is not None:
            key = Key(where[0], where[1], name)
            median = alarm.reference.median
            findings.append(Finding(key, SLOWDOWN, median, value, alarm.intervals, pace, names.calls[name]))
    return findings


def _stragglers(
    where: GroupKey, group: _Group, names: Judged, peer_values: List[Dict[str, float]], rule: Rule
) -> List[Finding]:
    peers = _peer_medians(peer_values)
    findings = []
    for name, value in names.values.items():
        peer = peers.get(name)
        streak = group.against_peers.get(name)
        if streak is None:
            streak = group.against_peers[name] = Streak()
        if streak.update(peer is not None and value > peer * (1 + rule.slowdown), rule) and peer is not None:
            key = Key(where[0], where[1], name)
            findings.append(Finding(key, STRAGGLER, peer, value, streak.count, calls=names.calls[name]))
    return findings


def _peer_medians(peer_values: List[Dict[str, float]]) -> Dict[str, float]:
    names = {name for values in peer_values for name in values}
    return {name: statistics.median(v[name] for v in peer_values if name in v) for name in names}
