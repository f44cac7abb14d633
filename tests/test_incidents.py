"""Incident detection and its parts, in-process: robust baselines, the detector, the store, the rate
limits, the --auto-trace text, the request rules, and what the sinks and the access policy make of it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from dynolog.edge import auth
from dynolog.incidents.actions import rate_limit
from dynolog.incidents.baseline import Reference, Rule, Series
from dynolog.incidents.detector import SLOWDOWN, STRAGGLER, Detection, Detector, Settings, Who
from dynolog.incidents.incident import Incident
from dynolog.incidents.store import IncidentStore
from dynolog.monitoring.sinks import Mark, ProcessLabels
from dynolog.monitoring.sinks.prometheus import PrometheusSink
from dynolog.monitoring.sinks.tensorboard import TensorBoardSink
from dynoproto import SERVICE
from dynoproto import dynolog_pb2 as pb
from msmonitor_contract.activity import Kind
from msmonitor_contract.kinds import NPUMONITOR
from msmonitor_contract.kinds.npumonitor import AUTO_TRACE, auto_trace
from msmonitor_contract.report import KindStat, NameStat, Report
from msmonitor_contract.values import FlagValueError

RULE = Rule(slowdown=0.25, for_intervals=3, window=10, min_samples=5)
SETTINGS = Settings(window=10, warmup=2, min_samples=5, min_total_ns=0)


def report(seq: int, per_call_ns: Dict[str, float], final: bool = False) -> Report:
    top = [NameStat(name, 10, int(ns * 10)) for name, ns in per_call_ns.items()]
    total = sum(n.total_ns for n in top)
    stat = KindStat(Kind.KERNEL, -1, 10 * len(top), total, 0, 0, top=top)
    return Report(seq, 1, "torch", seq * 10**9, (seq + 1) * 10**9, 10**9, kinds=[stat], final=final)


def who(host_pid: int = 100, rank: int = 0) -> Who:
    return Who(host_pid, host_pid, rank, 7, "node")


def feed(
    detector: Detector, values: List[float], who_: Optional[Who] = None, name: str = "aten::mm"
) -> List[Detection]:
    process = who_ or who()
    found = [detector.observe(process, report(seq, {name: v}), 0.25, 3) for seq, v in enumerate(values, 1)]
    return [d for d in found if d is not None]


# --- baseline -------------------------------------------------------------------------------------


@given(st.lists(st.floats(1, 1e6), min_size=1, max_size=50), st.floats(1, 1e9))
def test_one_outlier_in_three_moves_neither_the_median_nor_the_mad_out_of_the_data(
    values: List[float], outlier: float
) -> None:
    values = values * 3
    ordered, after = sorted(values), Reference.of([*values, outlier])
    assert ordered[0] <= after.median <= ordered[-1]
    assert after.mad <= ordered[-1] - ordered[0]


def test_an_alarm_needs_for_slow_intervals_in_a_row_and_fires_once_per_episode() -> None:
    series = Series(RULE.window)
    assert [series.observe(100.0, RULE) for _ in range(5)] == [None] * 5
    assert series.observe(200.0, RULE) is None and series.observe(200.0, RULE) is None
    alarm = series.observe(200.0, RULE)
    assert alarm is not None and (alarm.reference.median, alarm.current, alarm.intervals) == (100.0, 200.0, 3)
    assert [series.observe(200.0, RULE) for _ in range(10)] == [
        None
    ] * 10  # the baseline learns the new level
    assert series.reference == Reference(200.0, 0.0, 200.0)


def test_slow_intervals_that_stop_short_join_the_baseline_as_noise() -> None:
    series = Series(RULE.window)
    for value in [100.0] * 5 + [200.0, 200.0, 100.0, 200.0, 200.0, 100.0]:
        assert series.observe(value, RULE) is None
    assert series.samples[-10:].count(200.0) == 4  # the held ones joined the window


def test_a_noisy_name_must_stand_out_of_its_noise() -> None:
    series = Series(RULE.window)
    for value in [100.0, 160.0, 80.0, 150.0, 90.0, 140.0]:
        series.observe(value, RULE)
    reference = series.reference
    assert reference is not None and reference.threshold(RULE) > 100 * 1.25


# --- detector ---------------------------------------------------------------------------------------


def test_warm_up_and_a_new_name_never_alarm() -> None:
    detector = Detector(SETTINGS)
    assert feed(detector, [1000.0, 1000.0]) == []  # warm-up: 10x the later level, not judged
    assert feed(detector, [100.0] * 4 + [500.0] * 3) == []  # 2 warm-up + 2 judged: no baseline yet


def test_a_slowdown_is_found_after_for_intervals_naming_the_name() -> None:
    detector = Detector(SETTINGS)
    found = feed(detector, [100.0] * 7 + [150.0] * 3)
    assert len(found) == 1 and found[0].report_seq == 10
    finding = found[0].primary
    assert (finding.key.name, finding.detection, finding.baseline_ns, finding.current_ns) == (
        "aten::mm",
        SLOWDOWN,
        100,
        150,
    )
    assert found[0].figures[0].name == "aten::mm"


def test_steady_noise_raises_nothing() -> None:
    rng = random.Random(1)
    detector = Detector(SETTINGS)
    assert feed(detector, [100.0 * rng.lognormvariate(0, 0.05) for _ in range(2000)]) == []


def test_one_spike_while_the_baseline_forms_does_not_hide_a_slowdown() -> None:
    """A busy host's one 9x interval among the first: the tail guard is never the window's maximum."""
    detector = Detector(SETTINGS)
    found = feed(detector, [100.0, 100.0] + [100.0, 900.0, 100.0, 100.0, 100.0, 100.0] + [300.0] * 3)
    assert len(found) == 1 and found[0].report_seq == 11 and found[0].primary.baseline_ns == 100.0


def test_a_straggler_is_the_rank_slower_than_its_peers_and_only_it() -> None:
    detector = Detector(SETTINGS)
    found: List[Optional[Detection]] = []
    for seq in range(1, 10):
        for rank in range(3):
            value = 300.0 if rank == 1 else 100.0
            found.append(detector.observe(who(100 + rank, rank), report(seq, {"aten::mm": value}), 0.25, 3))
    hits = [d for d in found if d is not None]
    assert [(d.who.rank, d.primary.detection, d.primary.baseline_ns) for d in hits] == [(1, STRAGGLER, 100.0)]


def test_a_final_report_ends_the_process_as_a_peer() -> None:
    detector = Detector(SETTINGS)
    found = []
    for seq in range(1, 5):  # two judged intervals: a streak of 2, short of for=3
        detector.observe(who(100, 0), report(seq, {"aten::mm": 100.0}), 0.25, 3)
        found.append(detector.observe(who(101, 1), report(seq, {"aten::mm": 300.0}), 0.25, 3))
    detector.observe(who(100, 0), report(5, {}, final=True), 0.25, 3)
    for seq in range(5, 9):  # rank 0's last report is of this period, but it was its final one
        found.append(detector.observe(who(101, 1), report(seq, {"aten::mm": 300.0}), 0.25, 3))
    assert [d for d in found if d is not None] == []


def test_the_whole_process_slower_singles_out_no_name_but_one_name_among_them_is_found() -> None:
    detector = Detector(SETTINGS)
    names = {f"op{i}": 100.0 * (i + 1) for i in range(5)}
    busy = {name: 2 * value for name, value in names.items()}  # a busy host: every name 2x
    assert [detector.observe(who(), report(s, names), 0.25, 3) for s in range(1, 10)] == [None] * 9
    assert [detector.observe(who(), report(s, busy), 0.25, 3) for s in range(10, 20)] == [None] * 10
    one_slower = {**busy, "op2": 3 * busy["op2"]}
    found = [detector.observe(who(), report(s, one_slower), 0.25, 3) for s in range(20, 23)]
    assert found[:2] == [None, None] and found[2] is not None
    finding = found[2].primary
    assert finding.key.name == "op2" and finding.pace == pytest.approx(2.0, rel=0.1)


def test_a_slowed_operator_that_crowds_out_the_others_is_found_despite_its_callees() -> None:
    """As a CPU job showed: sort 20x slower takes ~90 % of the time, so only it, an operator it calls
    (arange) and one preempted small operator keep 2 % each. A pace taken from those three would be
    sort's own slowdown and hide it; the names below the floor still have baselines and set the pace."""
    detector = Detector(Settings(window=10, warmup=2, min_samples=3, min_total_ns=0, min_share=0.02))
    steady = {"sort": 700.0, "addmm": 50.0, "mm": 35.0, "copy_": 30.0, "arange": 22.0, "t": 2.0}
    slowed = {**steady, "sort": 14_000.0, "arange": 400.0, "copy_": 800.0}  # copy_: preempted, by chance
    found = [detector.observe(who(), report(s, steady), 0.5, 2) for s in range(1, 8)]
    found += [detector.observe(who(), report(s, slowed), 0.5, 2) for s in range(8, 10)]
    assert found[:8] == [None] * 8 and found[8] is not None
    assert found[8].primary.key.name == "sort" and found[8].primary.pace == 1.0


def test_the_incident_names_the_finding_that_added_the_most_time() -> None:
    detector = Detector(Settings(window=10, warmup=2, min_samples=3, min_total_ns=0, min_share=0.0))
    steady = {"sort": 700.0, "arange": 20.0, "mm": 100.0, "addmm": 100.0}
    slowed = {**steady, "sort": 7_000.0, "arange": 1_000.0}  # arange: 50x, sort 10x but 6.3 ms more
    found = [detector.observe(who(), report(s, steady), 0.5, 2) for s in range(1, 8)]
    found += [detector.observe(who(), report(s, slowed), 0.5, 2) for s in range(8, 10)]
    detection = found[-1]
    assert detection is not None and [f.key.name for f in detection.findings] == ["sort", "arange"]
    assert detection.primary.added_ns == (7_000.0 - 700.0) * 10  # ten calls in the interval


def test_a_name_with_a_sliver_of_the_time_is_not_judged() -> None:
    detector = Detector(Settings(window=10, warmup=2, min_samples=5, min_total_ns=0, min_share=0.02))
    steady = {"big": 1000.0, "tiny": 10.0}  # tiny: 1 % of the kind's time
    slower = {"big": 1000.0, "tiny": 100.0}  # 10x slower, still 9 %: it has no baseline to be judged by
    found = [detector.observe(who(), report(s, steady), 0.25, 3) for s in range(1, 10)]
    found += [detector.observe(who(), report(s, slower), 0.25, 3) for s in range(10, 15)]
    assert found == [None] * 14


def test_heavy_tailed_noise_is_held_back_by_the_baselines_own_tail() -> None:
    """A quarter of the intervals 2-6x slower at random (the relu operators of a CPU job on a busy
    host look like this): the MAD and the slowdown alone alarm ~23 times per 2 000 intervals; with the
    baseline's 90th percentile as a further guard, ~5."""
    alarms = 0
    for seed in range(5):
        rng = random.Random(seed)
        values = [
            100.0 * (rng.uniform(2, 6) if rng.random() < 0.25 else rng.lognormvariate(0, 0.05))
            for _ in range(2000)
        ]
        alarms += len(feed(Detector(SETTINGS), values))
    assert alarms <= 40


# --- store and rate limits --------------------------------------------------------------------------


def incident(host_pid: int = 100, at: float = 1000.0) -> Incident:
    detection = feed(Detector(SETTINGS), [100.0] * 7 + [150.0] * 3, who(host_pid))[0]
    found = Incident.of(detection)
    found.at = at
    return found


def test_incidents_survive_reopening_the_store(tmp_path: Path) -> None:
    path = str(tmp_path / "incidents.sqlite")
    store = IncidentStore(path)
    first = store.add(incident())
    first.traced, first.trace_files = True, ["/t/a.json"]
    store.update(first)
    store.add(incident(101))
    store.close()
    reopened = IncidentStore(path)
    try:
        assert [i.id for i in reopened.list()] == [1, 2]
        assert reopened.get(1) == first and reopened.list(limit=1)[0].host_pid == 101
        assert reopened.list(job_id=8) == [] and reopened.get(3) is None
    finally:
        reopened.close()


def test_cooldown_per_process_and_max_per_day_per_job() -> None:
    store = IncidentStore(":memory:")
    rule = AUTO_TRACE.model(cooldown_s=600, max_per_day=2)
    traced = store.add(incident(100, at=1000.0))
    traced.traced = True
    store.update(traced)
    assert "cooldown" in (rate_limit(store, incident(100), rule, now=1500.0) or "")
    assert rate_limit(store, incident(100), rule, now=1700.0) is None  # the cooldown passed
    assert rate_limit(store, incident(101), rule, now=1001.0) is None  # another process
    second = store.add(incident(101, at=1001.0))
    second.traced = True
    store.update(second)
    limited = rate_limit(store, incident(102), rule, now=1002.0)
    assert limited == "not traced: rate limit (max 2/day for job 7)"
    assert rate_limit(store, incident(102), rule, now=1000.0 + 86_401) is None  # a day later
    store.close()


# --- the client's text and the request's rules -------------------------------------------------------


def test_auto_trace_text_and_its_defaults() -> None:
    AutoTrace = AUTO_TRACE.model
    assert auto_trace("slowdown=10%,for=2,iterations=5,cooldown=2h,max=4/day") == AutoTrace(
        0.1, 2, 5, 7200, 4
    )
    assert auto_trace("on") == AutoTrace(0.25, 3, 2, 1800, 3)
    assert auto_trace("cooldown=90").cooldown_s == 90


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("slowdwn=25%", "unknown key 'slowdwn'"),
        ("for=three", "for='three' does not read as 3"),
        ("max=3/week", "max='3/week' does not read as 3/day"),
    ],
)
def test_bad_auto_trace_text_names_the_key(text: str, message: str) -> None:
    with pytest.raises(FlagValueError, match=message):
        auto_trace(text)


def test_the_daemon_rules_name_the_flag() -> None:
    request = pb.NpuMonitorRequest(
        stop=True, auto_trace=pb.AutoTrace(slowdown=0, for_intervals=1, iterations=1, max_per_day=1)
    )
    errors = [str(e) for e in NPUMONITOR.check(request)]
    assert errors == [
        "--auto-trace: goes with --npu-monitor-start",
        "--auto-trace: slowdown must be in 0..1000 % (above 0), got 0%",
    ]
    good = pb.NpuMonitorRequest(
        start=True, auto_trace=pb.AutoTrace(slowdown=0.25, for_intervals=3, iterations=2, max_per_day=3)
    )
    assert NPUMONITOR.check(good) == []


def test_read_only_clients_may_list_and_show_incidents() -> None:
    assert auth.is_read_only(f"/{SERVICE}/ListIncidents") and auth.is_read_only(f"/{SERVICE}/GetIncident")


# --- sinks -----------------------------------------------------------------------------------------


PROCESS = ProcessLabels("node", "7", 0, 100)


def test_prometheus_counts_incidents_by_kind_and_traced() -> None:
    sink = PrometheusSink(port=None)
    sink.daemon_incidents = lambda: {("Kernel", "true"): 2, ("Kernel", "false"): 1}
    page = generate_latest(sink.registry).decode()
    assert 'dynolog_incidents_total{kind="Kernel",traced="true"} 2.0' in page
    assert 'dynolog_incidents_total{kind="Kernel",traced="false"} 1.0' in page


def test_tensorboard_marks_the_incident_at_its_step(tmp_path: Path) -> None:
    sink = TensorBoardSink(tmp_path)
    sink.mark(
        PROCESS, Mark(step=12, walltime=1.0, device=-1, tag="incident/Kernel", value=1.5, text="incident 1")
    )
    sink.close()
    events = EventAccumulator(str(tmp_path / "device_host" / "rank_0"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("incident/Kernel")] == [(12, 1.5)]
    assert "incident/Kernel/text_summary" in events.Tags()["tensors"]


# --- deploy: the alert rules -----------------------------------------------------------------------


def test_the_alert_rules_parse_as_promql_over_series_the_daemon_exports() -> None:
    import promql_parser
    import yaml

    rules_file = Path(__file__).resolve().parent.parent / "deploy" / "prometheus" / "alerts-dynolog.yml"
    rules = [r for g in yaml.safe_load(rules_file.read_text())["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} == {"MsMonitorIncident", "MsMonitorSlowestRank"}
    exported = {"dynolog_incidents_total", "msmonitor_top_duration_seconds", "msmonitor_top_records"}
    exported |= {"msmonitor_interval_duration_seconds"}  # the time of a kind, which a slow name costs
    for rule in rules:
        names: List[str] = []

        def enter(node: object, names: List[str] = names) -> None:
            if isinstance(node, promql_parser.VectorSelector):
                names.append(node.name)

        promql_parser.walk(promql_parser.parse(rule["expr"]), enter, lambda node: None)
        assert names and set(names) <= exported, (rule["alert"], names)


# --- under contention (docs/incidents.md, "Under CPU contention") ------------------------------------


def test_under_contention_a_starved_interval_delays_the_incident_and_a_busy_one_can_hide_it() -> None:
    """A starved job's sample may hold none of the slowed name's calls: that interval is not judged, and
    the incident comes one interval later. An interval in which a busy neighbour slowed the other names
    raises the pace, so the slowed name is judged not slow in it: its streak ends, the slow values held
    out of its baseline join it as noise, and the window's 90th percentile is then the slow level: the
    slowdown is absorbed, not found."""
    others = {"aten::add": 100.0, "aten::relu": 100.0, "aten::copy_": 100.0}
    steady, slow = {"aten::mm": 100.0, **others}, {"aten::mm": 300.0, **others}
    starved = dict(others)  # no aten::mm call in the sample
    # A burst of preemption that caught the other names' calls, not the slowed one's: the pace is 3.
    busy = {"aten::mm": 300.0, **{name: 3 * value for name, value in others.items()}}

    def found(slowed: List[Dict[str, float]]) -> List[int]:
        detector = Detector(SETTINGS)
        intervals = [steady] * 7 + slowed
        seen = [detector.observe(who(), report(seq, v), 0.25, 3) for seq, v in enumerate(intervals, 1)]
        return [d.report_seq for d in seen if d is not None and d.primary.key.name == "aten::mm"]

    assert found([slow] * 3) == [10]
    assert found([slow, slow, starved, slow]) == [11]
    assert found([slow, slow, busy] + [slow] * 6) == []


def test_under_contention_a_slowdown_inside_a_preempted_baselines_tail_is_not_found() -> None:
    """Calls a busy neighbour preempted now and then give the baseline a heavy tail; a slowdown that
    stands out of a quiet baseline hides inside it, where the quiet baseline finds it."""
    quiet = [100.0] * 10
    busy = [100.0, 100.0, 400.0, 100.0, 100.0, 450.0, 100.0, 100.0, 420.0, 100.0]
    slowed = [350.0] * 3
    assert feed(Detector(SETTINGS), quiet + slowed) != []
    assert feed(Detector(SETTINGS), busy + slowed) == []
