"""npu-monitor end to end: dyno → daemon → plugin in a real PyTorch job → reports → watch and sinks."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from harness import (
    Daemon,
    free_port,
    read_line_until,
    rest_of_output,
    stop_process,
    trainer,
    wait_until,
)
from msmonitor_contract import wire
from wire_peer import PluginPeer

pytestmark = pytest.mark.torch


def monitor_state(daemon: Daemon, pid: int) -> str:
    return str((daemon.process(pid) or {}).get("monitor_state", ""))


def watch_reports(daemon: Daemon, count: int, timeout: float = 60) -> list:
    """Read *count* reports from `dyno --json npu-monitor --watch` (a real streaming client, JSON Lines)."""
    proc = subprocess.Popen(
        daemon.dyno.command("--json", "npu-monitor", "--watch"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        return [json.loads(read_line_until(proc, "{", timeout=timeout)) for _ in range(count)]
    finally:
        stop_process(proc)


def test_reports_arrive_every_interval_and_reach_every_sink(start_daemon, start_workload, tmp_path):
    prometheus = free_port()
    daemon = start_daemon(
        "--metric-log-dir", str(tmp_path / "tb"), "--prometheus-port", str(prometheus), "--use_JSON"
    )
    job = trainer(daemon, start_workload)
    reply = daemon.dyno_json(
        "npu-monitor",
        "--npu-monitor-start",
        "--report-interval-s",
        "1",
        "--mspti-activity-kind",
        "Kernel,API,Marker,Hccl",
    )
    assert reply["commandStatus"] == "effective"
    detail = reply["processes"][0]["detail"]
    assert "monitor running (torch backend)" in detail
    assert "Hccl unavailable: not observable through torch.profiler" in detail  # reported, not faked
    assert monitor_state(daemon, job.pid) == "MONITOR_STATE_RUNNING"

    reports = watch_reports(daemon, 2)
    assert all(r["pid"] == job.pid and r["rank"] == 0 for r in reports)
    kinds = {k["kind"] for k in reports[-1]["kinds"]}
    assert {"Kernel", "API"} <= kinds
    kernel = next(k for k in reports[-1]["kinds"] if k["kind"] == "Kernel")
    assert kernel["count"] > 0 and kernel["total_ns"] > 0
    assert any(n["name"] == "aten::addmm" for n in kernel["top"])

    page = urllib.request.urlopen(f"http://127.0.0.1:{prometheus}/metrics", timeout=10).read().decode()
    samples = [s for f in text_string_to_metric_families(page) for s in f.samples]
    kernel_samples = [s for s in samples if s.labels.get("kind") == "Kernel"]
    assert kernel_samples and kernel_samples[0].labels["rank"] == "0" and kernel_samples[0].labels["host"]
    (sampled,) = [s for s in samples if s.name == "msmonitor_interval_sampled_ratio"]
    assert 0 < sampled.value < 1, "the torch backend's figures are of its sampling window"

    runs = list((tmp_path / "tb").glob("device_host/*"))
    assert runs, "a TensorBoard run for the host's data"
    events = EventAccumulator(str(runs[0]))
    wait_until(lambda: events.Reload().Tags()["scalars"], what="TensorBoard scalars")
    assert any(tag.startswith("Kernel/") for tag in events.Tags()["scalars"])
    assert "sampled_fraction" in events.Tags()["scalars"]

    jsonl = daemon.log_file.with_name("dynolog_metrics.jsonl")
    assert wait_until(lambda: jsonl.exists() and jsonl.read_text().strip(), what="the JSONL metrics file")

    stop = daemon.dyno_json("npu-monitor", "--npu-monitor-stop")
    assert stop["commandStatus"] == "effective"
    wait_until(lambda: monitor_state(daemon, job.pid) == "MONITOR_STATE_IDLE", what="the monitor to stop")


def test_watch_labels_sampled_counts_and_the_job_prints_no_kineto_lines(daemon, start_workload):
    job = trainer(daemon, start_workload)
    daemon.dyno_json(
        "npu-monitor",
        "--npu-monitor-start",
        "--report-interval-s",
        "1",
        "--mspti-activity-kind",
        "Kernel,API",
    )
    live = subprocess.Popen(
        daemon.dyno.command("npu-monitor", "--watch"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        header = read_line_until(live, "HOST/RANK", timeout=60)
        row = read_line_until(live, "", timeout=10)  # the first process's first kind
        note = read_line_until(live, "* ", timeout=10)
    finally:
        ended = stop_process(live, signal.SIGINT)
    assert ended == 0, "Ctrl-C ends a watch as the user's stop: exit 0, within 10 s"
    assert header.split()[:6] == ["HOST/RANK", "KIND", "DEVICE", "COUNT", "EST.", "COUNT"]
    count, estimate = row.split()[3:5]
    assert row.split()[0].endswith("/0*") and int(estimate[1:]) > int(count) > 0, row
    assert re.fullmatch(
        r"\* \S+/0: torch backend sampled \d+\.\d\d s of the 1\.\d s interval \(\d+%\): COUNT and TOTAL are "
        r"of that window; EST\. COUNT is COUNT scaled to the interval, an estimate .*",
        note,
    ), note

    daemon.dyno_json("npu-monitor", "--npu-monitor-stop")
    wait_until(lambda: monitor_state(daemon, job.pid) == "MONITOR_STATE_IDLE", what="the monitor to stop")
    assert job.proc is not None and job.proc.stdin is not None
    job.proc.stdin.close()  # the job ends; all it wrote while monitored is in its output
    output = rest_of_output(job.proc)
    # Kineto's own lines: its initialisation off the thread that imported torch, and its start/stop notes.
    assert "External init callback" not in output and "USDT" not in output, output


def test_duration_expiry_frees_the_process_for_nputrace(daemon, start_workload, tmp_path):
    job = trainer(daemon, start_workload)
    # Long enough that the next dyno (about 0.5 s to start on a loaded machine) surely finds it running.
    daemon.dyno_json("npu-monitor", "--npu-monitor-start", "--report-interval-s", "1", "--duration", "4")
    blocked = daemon.dyno_json("nputrace", "--iterations", "1", "--log-file", str(tmp_path))
    assert blocked["reason"] == "REASON_NPU_MONITOR_RUNNING"
    wait_until(lambda: monitor_state(daemon, job.pid) == "MONITOR_STATE_IDLE", what="the duration to expire")
    assert (
        daemon.dyno_json("nputrace", "--iterations", "1", "--log-file", str(tmp_path))["commandStatus"]
        == "effective"
    )


def test_npu_monitor_is_refused_while_a_trace_runs(daemon, start_workload, tmp_path):
    job = trainer(daemon, start_workload)
    # The most iterations a trace may ask for: about 20 s, long enough to still be running.
    trace = daemon.dyno_json("nputrace", "--iterations", "1000", "--log-file", str(tmp_path))
    wait_until(
        lambda: (
            daemon.dyno_json("trace", trace["trace_id"])["processes"][0]["phase"] == "TRACE_PHASE_RUNNING"
        ),
        what="the trace to run",
    )
    reply = daemon.dyno_json("npu-monitor", "--npu-monitor-start")
    assert (reply["commandStatus"], reply["reason"]) == ("ineffective", "REASON_NPU_TRACE_RUNNING")
    job.kill()


def test_filter_keeps_only_matching_names(daemon, start_workload):
    trainer(daemon, start_workload)
    daemon.dyno_json(
        "npu-monitor",
        "--npu-monitor-start",
        "--report-interval-s",
        "1",
        "--mspti-activity-kind",
        "Kernel",
        "--filter",
        "Kernel:addmm",
    )
    report = watch_reports(daemon, 2)[-1]
    names = {n["name"] for k in report["kinds"] for n in k["top"]}
    assert names and all("addmm" in n for n in names)


@pytest.mark.parametrize(("export_type", "suffix"), [("Jsonl", "jsonl"), ("DB", "db")])
def test_log_file_mode_writes_records_per_process(daemon, start_workload, tmp_path, export_type, suffix):
    job = trainer(daemon, start_workload)
    daemon.dyno_json(
        "npu-monitor",
        "--npu-monitor-start",
        "--report-interval-s",
        "1",
        "--mspti-activity-kind",
        "Kernel",
        "--log-file",
        str(tmp_path),
        "--export-type",
        export_type,
    )
    wait_until(lambda: any(tmp_path.glob(f"msmonitor_{job.pid}_*.{suffix}")), what="the record file")
    daemon.dyno_json("npu-monitor", "--npu-monitor-stop")
    wait_until(lambda: monitor_state(daemon, job.pid) == "MONITOR_STATE_IDLE", what="the monitor to stop")
    path = next(tmp_path.glob(f"msmonitor_{job.pid}_*.{suffix}"))
    if suffix == "jsonl":
        records = [json.loads(line) for line in path.read_text().splitlines() if line]
        assert any(r.get("kind") == "Kernel" and r.get("name") for r in records)
    else:  # the writer makes every table on open: rows with names are what says it recorded
        with contextlib.closing(sqlite3.connect(path)) as db:
            names = db.execute(
                "SELECT DISTINCT s.value FROM COMPUTE_TASK_INFO k JOIN STRING_IDS s ON s.id = k.name"
            ).fetchall()
        assert names and all(name for (name,) in names), names


def test_bad_npu_monitor_flags_exit_2(daemon):
    result = daemon.dyno("npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel,Bogus")
    assert result.returncode == 2 and "--mspti-activity-kind: accepts" in result.stderr
    result = daemon.dyno("npu-monitor", "--npu-monitor-start", "--json-rotate-log-lines", "5")
    assert result.returncode == 2 and "an integer in 100..500000" in result.stderr


def test_a_lost_push_is_pushed_again_at_each_heartbeat_until_answered(daemon):
    peer = PluginPeer(daemon)
    with contextlib.closing(peer.sock):
        peer.heartbeat()
        reply = daemon.dyno_json("npu-monitor", "--npu-monitor-start", "--pids", str(os.getpid()))
        assert "pushed again at each heartbeat" in reply["processes"][0]["detail"], reply
        lost = peer.command()  # dropped: never answered

        peer.heartbeat()  # the daemon pushes it again after its acknowledgement
        again = peer.command()
        assert (again.trace_id, again.config) == (
            lost.trace_id,
            lost.config,
        ) and "NPU_MONITOR_START=true" in again.config
        peer.send(wire.MONITOR, wire.MonitorEvent(command_id=again.trace_id, state="running").to_payload())
        wait_until(lambda: monitor_state(daemon, os.getpid()) == "MONITOR_STATE_RUNNING", what="the answer")

        peer.heartbeat()  # answered: nothing more to push
        assert peer.nothing_queued()
        # The monitor stopping by itself (its DURATION) answers no command: nothing to match, all taken.
        peer.send(
            wire.MONITOR, wire.MonitorEvent(command_id="", state="idle", reason="duration").to_payload()
        )
        wait_until(lambda: monitor_state(daemon, os.getpid()) == "MONITOR_STATE_IDLE", what="the stop")
        assert daemon.dyno_json("status")["ipc"]["malformed"] == 0
