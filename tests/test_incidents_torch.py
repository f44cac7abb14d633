"""npu-monitor --auto-trace on real CPU PyTorch jobs: a slowdown is detected, traced, and monitoring resumes.

The daemon runs with 1 s reports and small windows (warm-up 2 intervals, baselines of 3) so that each
test takes seconds of training. Reports are counted in the daemon's JSONL sink; the job says at which
step it turned slow; nothing here sleeps to synchronise.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from harness import Daemon, Workload, read_line_until, trainer, wait_until

pytestmark = pytest.mark.torch

DETECTION = (
    "--incident-warmup",
    "2",
    "--incident-min-baseline",
    "3",
    "--incident-window",
    "10",
    "--use-json",
)


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    # The default keep-alive (60 s): a job busy writing its trace on a loaded machine may not be heard
    # from for seconds, and must not be forgotten for that.
    return start_daemon(*DETECTION)


def start_job(daemon: Daemon, start_workload, slow_file: Path, rank: int = 0) -> Workload:
    args = ("--slow-file", str(slow_file))
    return trainer(daemon, start_workload, rank, args, script="slowdown.py", WORLD_SIZE="3")


def names_the_sort(incident: Dict[str, Any]) -> bool:
    """The sort names it; or, on a busy machine whose sample missed an interval of the sort's own calls
    (its streak starts again), aten::copy_ — the sort copies its eight times larger input — names it,
    with the slower sort among its kind's figures."""
    slower = [f["name"] for f in incident["figures"] if f["current_ns"] > 1.5 * f["baseline_ns"]]
    return incident["name"] == "aten::sort" or (incident["name"] == "aten::copy_" and "aten::sort" in slower)


def monitor(daemon: Daemon, auto_trace: str, *pids: int) -> None:
    reply = daemon.dyno_json(
        "npu-monitor",
        "--npu-monitor-start",
        "--report-interval-s",
        "1",
        "--mspti-activity-kind",
        "Kernel",
        "--auto-trace",
        auto_trace,
        "--pids",
        ",".join(map(str, pids)),
    )
    assert reply["commandStatus"] == "effective", reply


def reports(daemon: Daemon, pid: int) -> List[Dict[str, Any]]:
    path = daemon.workdir / "dynolog_metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r["report"] for r in map(json.loads, lines) if r["pid"] == pid]


def sort_times(daemon: Daemon, pid: int, since: float = 0.0) -> List[Any]:
    """Per report: its seq, end (s after *since*), and aten::sort's time per call (µs) and share of the
    kind, to read a failure by."""
    out = []
    for r in reports(daemon, pid):
        for kind in r.get("kinds", []):
            total = kind.get("total_ns", 0) or 1
            for n in kind.get("top", []):
                if n.get("name") == "aten::sort" and n.get("count"):
                    out.append(
                        (
                            r["seq"],
                            round(r["end_ns"] / 1e9 - since, 2),
                            round(n["total_ns"] / n["count"] / 1e3),
                            round(n["total_ns"] / total, 2),
                        )
                    )
    return out


def incidents(daemon: Daemon) -> List[Dict[str, Any]]:
    return daemon.dyno_json("incidents")  # type: ignore[no-any-return]


def test_a_slower_operator_is_traced_and_monitoring_resumes(daemon, start_workload, tmp_path):
    slow_file = tmp_path / "slow"
    job = start_job(daemon, start_workload, slow_file)
    monitor(daemon, "slowdown=50%,for=2,iterations=2,cooldown=0s,max=5/day", job.pid)
    wait_until(lambda: len(reports(daemon, job.pid)) >= 5, 30, "a baseline of reports")
    assert incidents(daemon) == []
    last_fast = reports(daemon, job.pid)[-1]["seq"]
    touched = time.time()
    slow_file.touch()
    slow_from = int(read_line_until(job.proc, "slow from step").split()[-1])

    incident = wait_until(lambda: incidents(daemon), 30, "an incident")[0]
    # Found at the for-th report that shows the slower sort (one more allowed: on a busy machine an
    # interval's sample may miss the sort's calls or catch a preempted neighbour).
    times = sort_times(daemon, job.pid, touched)
    fast = statistics.median(us for seq, _, us, _ in times if seq <= last_fast)
    first_slow = next((seq for seq, _, us, _ in times if seq > last_fast and us > 3 * fast), 0)
    assert last_fast < first_slow <= incident["report_seq"] <= first_slow + 2, (last_fast, incident, times)
    assert (incident["kind"], incident["detection"]) == ("Kernel", "slowdown")
    assert incident["pid"] == job.pid and incident["current_ns"] > 1.5 * incident["baseline_ns"]
    assert names_the_sort(incident), incident

    done = wait_until(
        lambda: next(
            (
                i
                for i in incidents(daemon)
                if i["action"].startswith("traced") and "resumed" in i["timeline"][-1]["what"]
            ),
            None,
        ),
        60,
        "the trace and the resume",
    )
    trace = daemon.dyno_json("trace", done["trace_id"])["processes"][0]
    assert trace["start_step"] >= slow_from and trace["stop_step"] - trace["start_step"] == 2
    assert done["trace_files"] and all(Path(f).exists() for f in done["trace_files"])
    assert Path(trace["output"]).parent == daemon.workdir / "traces"
    assert [e["what"] for e in done["timeline"]][-1] == "npu-monitor resumed"

    # Monitoring runs again, with the same settings: new reports arrive after the trace.
    resumed = len(reports(daemon, job.pid))
    wait_until(lambda: len(reports(daemon, job.pid)) >= resumed + 2, 60, "reports after the trace")
    assert daemon.process(job.pid)["monitor_state"] == "MONITOR_STATE_RUNNING"
    shown = daemon.dyno("incidents", "show", str(done["id"]), expect=0).stdout
    assert "aten::sort" in shown and "npu-monitor resumed" in shown

    # The incidents survive a restart of the daemon.
    kept = incidents(daemon)
    daemon.restart()
    assert incidents(daemon) == kept


def test_a_slow_rank_among_three_is_the_only_straggler(daemon, start_workload, tmp_path):
    slow_file = tmp_path / "slow"
    slow_file.touch()  # rank 1 is slow from its start: no slowdown against itself, only against its peers
    jobs = [
        start_job(daemon, start_workload, slow_file if rank == 1 else tmp_path / "never", rank)
        for rank in range(3)
    ]
    monitor(daemon, "slowdown=100%,for=2,iterations=1,cooldown=30m,max=1/day", *(j.pid for j in jobs))
    wait_until(lambda: incidents(daemon), 30, "a straggler incident")
    wait_until(lambda: all(len(reports(daemon, j.pid)) >= 8 for j in jobs), 40, "more reports")
    stragglers = [i for i in incidents(daemon) if i["detection"] == "straggler" and i["name"] == "aten::sort"]
    # Only rank 1's sort is slower than its peers'; on a loaded machine other names of any rank may
    # lag a moment too, which is not what this test is about.
    assert stragglers and {i["rank"] for i in stragglers} == {1}, (
        [(i["rank"], i["detection"], i["name"], i["report_seq"]) for i in incidents(daemon)],
        [sort_times(daemon, j.pid) for j in jobs],
    )
    assert all(i["current_ns"] > 2 * i["baseline_ns"] for i in stragglers)


def test_a_steady_job_raises_nothing(daemon, start_workload, tmp_path):
    job = start_job(daemon, start_workload, tmp_path / "never")
    # for=5: the per-call times of small CPU operators on a shared machine are heavy-tailed (see
    # benchmarks/incidents.py); the defaults' for=3 alarms on such noise now and then.
    monitor(daemon, "slowdown=25%,for=5", job.pid)
    wait_until(lambda: len(reports(daemon, job.pid)) >= 15, 40, "15 report intervals")
    assert incidents(daemon) == []


def test_the_daily_limit_leaves_the_second_incident_of_the_job_untraced(daemon, start_workload, tmp_path):
    slow_file = tmp_path / "slow"
    jobs = [start_job(daemon, start_workload, slow_file, rank) for rank in range(2)]  # one job, two ranks
    monitor(daemon, "slowdown=50%,for=2,iterations=1,cooldown=0s,max=1/day", *(j.pid for j in jobs))
    wait_until(lambda: all(len(reports(daemon, j.pid)) >= 5 for j in jobs), 30, "baselines of reports")
    slow_file.touch()  # both ranks' sort gets slower at once: two incidents of one job

    def sorts() -> List[Dict[str, Any]]:
        return [i for i in incidents(daemon) if names_the_sort(i) and i["detection"] == "slowdown"]

    wait_until(lambda: len({i["pid"] for i in sorts()}) == 2, 30, "both ranks' incidents")
    # The job's first incident (on a busy machine, perhaps another name's) is traced; every later one
    # of the job within the day is recorded, not traced.
    first, *later = sorted(incidents(daemon), key=lambda i: i["id"])
    assert first["traced"] and later
    job_id = first["job_id"]
    for incident in later:
        assert not incident["traced"] and incident["trace_id"] == "" and incident["trace_files"] == []
        assert incident["action"] == f"not traced: rate limit (max 1/day for job {job_id})"


def test_a_trace_that_ends_while_the_daemon_is_away_is_recorded_and_the_monitor_resumed(
    daemon, start_workload, tmp_path
):
    slow_file = tmp_path / "slow"
    job = start_job(daemon, start_workload, slow_file)
    # 200 steps (seconds): the trace still runs when the poll below sees it begin and stops the daemon.
    monitor(daemon, "slowdown=50%,for=2,iterations=200,cooldown=0s,max=5/day", job.pid)
    wait_until(lambda: len(reports(daemon, job.pid)) >= 5, 30, "a baseline of reports")
    slow_file.touch()
    tracing = wait_until(
        lambda: next(
            (i for i in incidents(daemon) if any("nputrace" in e["what"] for e in i["timeline"])), None
        ),
        30,
        "the auto-trace to start",
    )
    assert tracing["action"] == "tracing"
    daemon.stop()
    # The job traces on and writes its files with no daemon to tell: its last events wait in the plugin
    # until the next daemon answers its hello.
    wait_until(
        lambda: list((daemon.workdir / "traces").glob("*/summary.txt")), 60, "the job to write its trace"
    )
    daemon.start()

    def resumed() -> Dict[str, Any] | None:
        incident = next(i for i in incidents(daemon) if i["id"] == tracing["id"])
        return incident if incident["timeline"][-1]["what"].startswith("npu-monitor resumed") else None

    incident = wait_until(resumed, 60, "the resume after the restart")
    assert incident["timeline"][-1]["what"] == "npu-monitor resumed after a daemon restart", incident
    assert incident["action"].startswith("traced"), incident["action"]
    assert any(f.endswith("/summary.txt") for f in incident["trace_files"]), incident
    before = len(reports(daemon, job.pid))
    wait_until(lambda: len(reports(daemon, job.pid)) >= before + 2, 60, "reports after the resume")
    assert daemon.process(job.pid)["monitor_state"] == "MONITOR_STATE_RUNNING"
