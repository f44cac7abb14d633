"""nputrace --pause-monitor on a real monitored PyTorch job: the monitor stops for the trace, the trace
is written, and the monitor runs again with the settings it had; without the flag the trace is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import Daemon, trainer, wait_until
from test_npu_monitor import monitor_state, watch_reports
from test_traces import profiler_steps

pytestmark = pytest.mark.torch


def test_a_monitored_process_pauses_its_monitor_for_the_trace_and_resumes_it(
    daemon: Daemon, start_workload, tmp_path: Path
):
    job = trainer(daemon, start_workload)
    # 1 s reports of two kinds: not the defaults (60 s), so reports after the trace prove the settings.
    started = daemon.dyno_json(
        "npu-monitor",
        "--npu-monitor-start",
        "--report-interval-s",
        "1",
        "--mspti-activity-kind",
        "Kernel,API",
    )
    assert started["commandStatus"] == "effective", started

    refused = daemon.dyno_json("nputrace", "--iterations", "2", "--log-file", str(tmp_path))
    assert refused["reason"] == "REASON_NPU_MONITOR_RUNNING", refused

    args = ("nputrace", "--iterations", "2", "--log-file", str(tmp_path), "--pause-monitor", "--wait")
    reply = daemon.dyno_json(*args, "--wait-timeout", "40")
    assert reply["commandStatus"] == "effective", reply
    assert reply["processes"][0]["detail"] == "monitor paused, resumes after the trace", reply
    (process,) = reply["trace"]["processes"]
    assert process["phase"] == "TRACE_PHASE_FINISHED", process
    start = process["start_step"]
    trace_file = next(Path(process["output"]).glob("*.pt.trace.json"))
    assert profiler_steps(trace_file) == [start, start + 1]

    wait_until(
        lambda: monitor_state(daemon, job.pid) == "MONITOR_STATE_RUNNING", what="the monitor to resume"
    )
    reports = watch_reports(daemon, 2, timeout=20)
    assert all(r["pid"] == job.pid for r in reports)
    interval_s = (reports[-1]["end_ns"] - reports[-1]["start_ns"]) / 1e9
    assert interval_s < 5, f"the resumed monitor reports every {interval_s:.1f} s, not its own 1 s"
    assert {"Kernel", "API"} <= {k["kind"] for k in reports[-1]["kinds"]}
    (after,) = daemon.dyno_json("trace", reply["trace_id"])["processes"]
    assert not any(w.startswith("npu-monitor not resumed") for w in after["warnings"]), after


def test_a_monitor_this_daemon_did_not_start_is_not_paused(daemon: Daemon, start_workload, tmp_path: Path):
    job = trainer(daemon, start_workload)
    daemon.dyno_json("npu-monitor", "--npu-monitor-start", "--report-interval-s", "1")
    daemon.restart()  # the process keeps monitoring; this daemon never learnt with which settings
    wait_until(lambda: monitor_state(daemon, job.pid) == "MONITOR_STATE_RUNNING", what="the job to say hello")
    reply = daemon.dyno_json("nputrace", "--iterations", "1", "--log-file", str(tmp_path), "--pause-monitor")
    assert reply["reason"] == "REASON_NPU_MONITOR_RUNNING", reply
    assert "was not paused" in reply["processes"][0]["detail"], reply
    assert monitor_state(daemon, job.pid) == "MONITOR_STATE_RUNNING"
