"""On-demand traces of running PyTorch processes, end to end: dyno → daemon → plugin/Kineto → files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import grpc
import pytest

import legacy_cli as cli
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, Workload, trainer, wait_until
from msmonitor_contract import wire

pytestmark = pytest.mark.torch


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    # A 3 s keep-alive makes plugins heartbeat every second, so the step the daemon last heard of
    # lags the real one by about 50 steps (at 20 ms a step): future start steps below allow for that.
    return start_daemon("--process-keepalive-s", "3")


def kineto_trainer(daemon: Daemon, start_workload):
    """Stock PyTorch (no plugin), registered by its first poll."""
    job = start_workload("train.py", daemon.kineto_env())
    wait_until(lambda: daemon.process(job.pid), what="Kineto's first poll")
    return job


def step_of(daemon: Daemon, pid: int) -> int:
    return int((daemon.process(pid) or {}).get("current_step", 0))


def trace_events(path: Path) -> list:
    return json.loads(path.read_text())["traceEvents"]


def profiler_steps(path: Path) -> list:
    return sorted(
        int(e["name"].split("#")[1])
        for e in trace_events(path)
        if e.get("name", "").startswith("ProfilerStep#")
    )


def test_nputrace_records_exactly_the_requested_steps_with_analysis(daemon, start_workload, tmp_path):
    job = trainer(daemon, start_workload)
    start = step_of(daemon, job.pid) + 150
    result = daemon.dyno(
        "--json",
        "nputrace",
        "--start-step",
        str(start),
        "--iterations",
        "3",
        "--log-file",
        str(tmp_path),
        "--analyse",
        "--profiler-level",
        "Level1",
        "--l2-cache",
        "--wait",
        "--wait-timeout",
        "120",
    )
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["commandStatus"] == "effective"
    assert reply["processes_matched"] == [job.pid]
    process = reply["trace"]["processes"][0]
    assert process["phase"] == "TRACE_PHASE_FINISHED"
    assert (process["start_step"], process["stop_step"]) == (start, start + 3)
    phases = [h["phase"].removeprefix("TRACE_PHASE_") for h in process["history"]]
    assert phases == ["STAGED", "READY", "RUNNING", "FINISHED"]
    assert [h["at"] for h in process["history"]] == sorted(h["at"] for h in process["history"])
    trace_dir = Path(process["output"])
    assert trace_dir.parent == tmp_path and trace_dir.name.startswith(f"{os.uname().nodename}_{job.pid}_")
    assert trace_dir.name.endswith("_torch")
    trace_file = next(trace_dir.glob("*.pt.trace.json"))
    assert sorted(process["files"]) == sorted(str(p) for p in trace_dir.iterdir())
    assert profiler_steps(trace_file) == [start, start + 1, start + 2]
    assert any("NPU activities unavailable" in w for w in process["warnings"])
    # Ascend-only options torch.profiler cannot apply are named; those left at their defaults are not.
    assert any(w.endswith(": --l2-cache=true, --profiler-level=Level1") for w in process["warnings"]), process

    summary = json.loads((trace_dir / "summary.json").read_text())
    durations = {
        int(e["name"].split("#")[1]): e["dur"] / 1000
        for e in trace_events(trace_file)
        if e.get("name", "").startswith("ProfilerStep#")
    }
    assert {s["step"]: s["duration_ms"] for s in summary["steps"]} == pytest.approx(durations)
    assert any(op["name"] == "aten::addmm" for op in summary["top_by_total"])
    assert "Top operators by self time" in (trace_dir / "summary.txt").read_text()


def test_rank_list_selects_ranks_and_the_response_says_who(daemon, start_workload, tmp_path):
    rank0, rank1 = trainer(daemon, start_workload, 0), trainer(daemon, start_workload, 1)
    reply = daemon.dyno_json("nputrace", "--iterations", "1", "--log-file", str(tmp_path), "--rank-list", "1")
    assert reply["commandStatus"] == "effective"
    assert [p["pid"] for p in reply["processes"]] == [rank1.pid]
    assert rank0.pid not in reply["processes_matched"]
    finished = daemon.dyno("trace", reply["trace_id"], "--wait", "--wait-timeout", "60")
    assert finished.returncode == 0, finished.stdout + finished.stderr


def test_busy_and_past_start_steps_are_ineffective_with_the_reason(daemon, start_workload, tmp_path):
    job = trainer(daemon, start_workload)
    far = step_of(daemon, job.pid) + 100_000
    first = daemon.dyno_json(
        "nputrace", "--start-step", str(far), "--iterations", "1", "--log-file", str(tmp_path)
    )
    assert first["commandStatus"] == "effective"
    wait_until(
        lambda: daemon.dyno_json("trace", first["trace_id"])["processes"][0]["phase"] == "TRACE_PHASE_READY",
        what="the plugin to accept",
    )

    waited = daemon.dyno("trace", first["trace_id"], "--wait", "--wait-timeout", "1")
    assert waited.returncode == 1, "a --wait that gave up is a failure for scripts"
    assert f"trace {first['trace_id']} not done after --wait-timeout 1 s" in waited.stderr

    second = daemon.dyno("nputrace", "--iterations", "1", "--log-file", str(tmp_path))
    assert second.returncode == 1
    assert "commandStatus: ineffective" in second.stdout
    busy = f"busy with trace {first['trace_id']} (ready, steps {far}-{far})"
    assert busy in second.stdout, second.stdout
    # msMonitor's and dynolog's CLIs read the same words from the legacy JSON answer.
    legacy = json.loads(
        cli.send(daemon.port, cli.set_config(cli.msmonitor_nputrace(str(tmp_path), -1, 1))) or b""
    )
    assert busy in legacy["message"] and legacy["outcomes"][0]["status"] == "trace_busy", legacy
    assert daemon.dyno_json("processes")[0]["trace_state"] == "TRACE_STATE_READY"

    # `dyno trace` without an id lists it, newest first, with its processes' phases and its folder.
    listed = daemon.dyno_json("trace")["traces"]
    assert listed[0]["trace_id"] == first["trace_id"] and listed[0]["kind"] == "nputrace"
    assert listed[0]["phases"] == [{"phase": "TRACE_PHASE_READY", "processes": 1}]
    assert listed[0]["folders"] == [str(tmp_path)] and not listed[0]["done"]
    table = daemon.dyno("trace", expect=0).stdout
    assert first["trace_id"] in table and "1 ready" in table, table
    needs_id = daemon.dyno("trace", "--wait")
    assert needs_id.returncode == 2 and "--wait acts on one trace: name its TRACE_ID" in needs_id.stderr

    wait_until(lambda: step_of(daemon, job.pid) > 3, what="steps to pass")
    job.stop()
    other = trainer(daemon, start_workload)
    wait_until(lambda: step_of(daemon, other.pid) > 3, what="steps to pass")
    past = daemon.dyno_json(
        "nputrace",
        "--start-step",
        "1",
        "--iterations",
        "1",
        "--log-file",
        str(tmp_path),
        "--pids",
        str(other.pid),
    )
    assert (past["commandStatus"], past["reason"]) == ("ineffective", "REASON_START_STEP_PASSED")
    assert "start step 1 has passed: the process is at step " in past["message"], past


def test_a_process_killed_mid_trace_yields_a_failed_outcome(start_daemon, start_workload, tmp_path):
    daemon = start_daemon("--process-keepalive-s", "2")
    job = trainer(daemon, start_workload)
    # The most iterations a trace may ask for: about 20 s, long enough to still be running.
    reply = daemon.dyno_json("nputrace", "--iterations", "1000", "--log-file", str(tmp_path))
    wait_until(
        lambda: (
            daemon.dyno_json("trace", reply["trace_id"])["processes"][0]["phase"] == "TRACE_PHASE_RUNNING"
        ),
        what="the trace to run",
    )
    job.kill()
    info = wait_until(
        lambda: (lambda t: t if t["done"] else None)(daemon.dyno_json("trace", reply["trace_id"])),
        what="the failure to be noticed",
    )
    assert info["processes"][0]["phase"] == "TRACE_PHASE_FAILED"
    assert "before the trace finished" in info["processes"][0]["error"]


def test_a_daemon_restart_between_staging_and_the_start_step_loses_nothing(daemon, start_workload, tmp_path):
    job = trainer(daemon, start_workload)
    start = step_of(daemon, job.pid) + 250  # about 5 s ahead
    reply = daemon.dyno_json(
        "nputrace", "--start-step", str(start), "--iterations", "2", "--log-file", str(tmp_path)
    )
    wait_until(
        lambda: daemon.dyno_json("trace", reply["trace_id"])["processes"][0]["phase"] == "TRACE_PHASE_READY",
        what="the plugin to accept",
    )
    daemon.restart()
    # The plugin re-registers with the trace it holds; the new daemon then follows it to the end.
    wait_until(
        lambda: daemon.dyno("trace", reply["trace_id"]).returncode == 0, what="the new daemon to learn of it"
    )
    result = daemon.dyno("--json", "trace", reply["trace_id"], "--wait", "--wait-timeout", "90")
    process = json.loads(result.stdout)["processes"][0]
    assert process["phase"] == "TRACE_PHASE_FINISHED", (process, result.stderr)
    assert profiler_steps(next(Path(process["output"]).glob("*.pt.trace.json"))) == [start, start + 1]


def test_gputrace_runs_in_stock_pytorch_through_kineto(daemon, start_workload, tmp_path):
    job = kineto_trainer(daemon, start_workload)
    reply = daemon.dyno_json(
        "gputrace",
        "--log-file",
        str(tmp_path / "t.json"),
        "--iterations",
        "5",
        "--wait",
        "--wait-timeout",
        "90",
    )
    assert reply["activity_profilers_triggered"] == [job.pid]
    assert reply["event_profilers_busy"] == 0
    process = reply["trace"]["processes"][0]
    assert process["phase"] == "TRACE_PHASE_FINISHED", process
    written = tmp_path / f"t_{job.pid}.json"
    assert process["files"] == [str(written)]
    data = json.loads(written.read_text())
    assert data["trace_id"] == reply["trace_id"]  # REQUEST_TRACE_ID reached Kineto


def test_gputrace_into_a_missing_folder_is_refused_at_once_for_kineto_and_made_by_the_plugin(
    daemon, start_workload, tmp_path
):
    kineto = kineto_trainer(daemon, start_workload)
    plugin = trainer(daemon, start_workload)
    missing = tmp_path / "not" / "yet"
    began = time.monotonic()
    refused = daemon.dyno_json(
        "gputrace", "--log-file", str(missing / "k.json"), "--iterations", "2", "--pids", str(kineto.pid)
    )
    assert time.monotonic() - began < 10, "answered at once, not after Kineto's silence"
    assert (refused["commandStatus"], refused["reason"]) == ("ineffective", "REASON_OUTPUT_MISSING")
    assert f"the folder {missing} does not exist there" in refused["message"]
    assert f"mkdir -p {missing}" in refused["message"]
    made = daemon.dyno_json(
        "gputrace",
        "--log-file",
        str(missing / "p.json"),
        "--iterations",
        "2",
        "--pids",
        str(plugin.pid),
        "--wait",
    )
    process = made["trace"]["processes"][0]
    assert process["phase"] == "TRACE_PHASE_FINISHED", process
    assert process["files"] == [str(missing / f"p_{plugin.pid}.json")]


def test_gputrace_duration_mode_in_stock_pytorch(daemon, start_workload, tmp_path):
    job = kineto_trainer(daemon, start_workload)
    reply = daemon.dyno_json(
        "gputrace",
        "--log-file",
        str(tmp_path / "d.json"),
        "--duration-ms",
        "300",
        "--wait",
        "--wait-timeout",
        "90",
    )
    assert reply["trace"]["processes"][0]["phase"] == "TRACE_PHASE_FINISHED"
    assert (tmp_path / f"d_{job.pid}.json").stat().st_size > 0


def test_gputrace_to_a_plugin_process_writes_where_kineto_would(daemon, start_workload, tmp_path):
    job = trainer(daemon, start_workload)
    reply = daemon.dyno_json(
        "gputrace", "--log-file", str(tmp_path / "g.json"), "--iterations", "2", "--wait"
    )
    process = reply["trace"]["processes"][0]
    assert process["phase"] == "TRACE_PHASE_FINISHED"
    assert process["files"] == [str(tmp_path / f"g_{job.pid}.json")]
    assert len(profiler_steps(tmp_path / f"g_{job.pid}.json")) == 2


def test_nputrace_time_based(daemon, start_workload, tmp_path):
    trainer(daemon, start_workload)
    reply = daemon.dyno_json("nputrace", "--duration-ms", "200", "--log-file", str(tmp_path), "--wait")
    process = reply["trace"]["processes"][0]
    assert process["phase"] == "TRACE_PHASE_FINISHED"
    # Whole steps from the boundary it started at to the first one at least 200 ms later: how many
    # depends on how fast the job steps, the time they cover does not.
    trace_file = next(Path(process["output"]).glob("*.pt.trace.json"))
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in trace_events(trace_file)
        if e.get("name", "").startswith("ProfilerStep#")
    )
    steps = profiler_steps(trace_file)
    assert steps == list(range(steps[0], steps[0] + len(steps)))
    assert spans[-1][1] - spans[0][0] >= 200_000 * 0.99, spans  # µs; 1 % for the profiler's clock


def test_nputrace_is_refused_while_npu_monitor_runs(daemon, start_workload, tmp_path):
    """The monitor state comes from msMonitor's npuMonitorStatus datagram, sent here by the test."""
    import socket

    client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    client.bind(str(daemon.socket_dir / "npu-client"))
    try:
        poll = wire.KinetoRequest(3, 0, (os.getpid(),)).pack()
        client.sendto(wire.encode(wire.REQ, poll), str(daemon.socket_dir / "dynolog"))
        client.recv(wire.MAX_DATAGRAM)
        running = wire.NpuStatus(
            status=1, current_step=0, start_step=0, stop_step=0, pid=os.getpid(), job_id=0
        )
        client.sendto(
            wire.encode(wire.NPU_MONITOR_STATUS, running.pack()), str(daemon.socket_dir / "dynolog")
        )
        wait_until(
            lambda: (daemon.process(os.getpid()) or {}).get("monitor_state") == "MONITOR_STATE_RUNNING",
            what="the monitor state",
        )
        reply = daemon.dyno_json("nputrace", "--iterations", "1", "--log-file", str(tmp_path))
        assert (reply["commandStatus"], reply["reason"]) == ("ineffective", "REASON_NPU_MONITOR_RUNNING")
    finally:
        client.close()


def test_no_process_and_no_match_are_ineffective(daemon, start_workload, tmp_path):
    empty = daemon.dyno("nputrace", "--iterations", "1", "--log-file", str(tmp_path))
    assert empty.returncode == 1 and "no process is registered with this daemon" in empty.stdout
    trainer(daemon, start_workload)
    none = daemon.dyno_json("nputrace", "--iterations", "1", "--log-file", str(tmp_path), "--job-id", "999")
    assert none["reason"] == "REASON_NO_PROCESS_MATCHED"
    assert "matches job 999" in none["message"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--iterations", "0", "--duration-ms", "0"],
            "--duration-ms: must be in 1..3600000 ms when --iterations is not given",
        ),
        (
            ["--start-step", "-2", "--iterations", "1"],
            "--start-step: must be -1 (the next step) or a step number",
        ),
        (["--activities", "CPU,GPU", "--iterations", "1"], "--activities: accepts CPU, NPU; got GPU"),
        (["--export-type", "Csv", "--iterations", "1"], "--export-type: must be one of Text, Db; got 'Csv'"),
        (["--async-mode", "--iterations", "1"], "--async-mode: needs --analyse"),
        (["--rank-list", "a,b", "--iterations", "1"], "--rank-list: expected comma-separated integers"),
    ],
)
def test_bad_nputrace_flags_exit_2_naming_the_flag(daemon, tmp_path, args, message):
    result = daemon.dyno("nputrace", "--log-file", str(tmp_path), *args)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize(("kind", "typed"), [("nputrace", "0"), ("gputrace", "0"), ("gputrace", "-1")])
def test_a_typed_iterations_below_1_is_refused_not_a_time_based_trace(daemon, tmp_path, kind, typed):
    """The request's 0 is "not given" (time-based); a user who typed 0 asked for no steps, and is told."""
    result = daemon.dyno(kind, "--log-file", str(tmp_path / "t.json"), "--iterations", typed)
    assert result.returncode == 2 and result.stdout == ""
    expected = f"--iterations: must be in 1..1000 (or absent for a time-based trace), got {typed}"
    assert expected in result.stderr


def test_the_daemon_validates_too(daemon):
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = pb_grpc.DynologStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.NpuTrace(
                pb.NpuTraceRequest(log_file="relative/dir", iterations=1, activities=["CPU"]), timeout=5
            )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "--log-file: must be an absolute path on the traced node" in caught.value.details()


def test_a_full_filesystem_fails_the_trace_saying_so_and_the_job_trains_on(daemon, tmp_path):
    """The trace folder is a 64 KiB tmpfs in the job's own mount namespace: the trace cannot fit."""
    full = tmp_path / "full"
    full.mkdir()
    mount = 'mount -t tmpfs -o size=64k tmpfs "$0" && exec "$@"'
    job = Workload(
        "train.py",
        daemon.plugin_env(),
        launcher=["unshare", "--mount", "--", "sh", "-c", mount, str(full)],
    )
    try:
        job.start()
        daemon.wait_registered(job.pid)
        reply = daemon.dyno_json("nputrace", "--iterations", "20", "--log-file", str(full), "--wait")
        process = reply["trace"]["processes"][0]
        assert process["phase"] == "TRACE_PHASE_FAILED"
        assert "no space left on device" in process["error"], process["error"]
        assert process["error"].startswith(f"cannot write the trace into {full}/"), process["error"]
        inside = Path(f"/proc/{job.pid}/root{full}")  # the tmpfs, as the job's mount namespace has it
        assert not list(inside.iterdir()), "no half-written file, no folder made for nothing"
        before = step_of(daemon, job.pid)
        wait_until(lambda: step_of(daemon, job.pid) > before, what="the job to train on")
    finally:
        job.stop()


def test_a_daemon_killed_mid_trace_and_restarted_still_sees_the_trace_end(daemon, start_workload, tmp_path):
    job = trainer(daemon, start_workload)
    reply = daemon.dyno_json("nputrace", "--iterations", "100", "--log-file", str(tmp_path))  # about 2 s
    wait_until(
        lambda: (
            daemon.dyno_json("trace", reply["trace_id"])["processes"][0]["phase"] == "TRACE_PHASE_RUNNING"
        ),
        what="the trace to run",
    )
    assert daemon.proc is not None
    daemon.proc.kill()  # no goodbye, no clean shutdown: sockets left behind
    daemon.proc.wait(timeout=30)
    daemon.start()
    wait_until(
        lambda: daemon.dyno("trace", reply["trace_id"]).returncode == 0, what="the new daemon to learn of it"
    )
    result = daemon.dyno("--json", "trace", reply["trace_id"], "--wait", "--wait-timeout", "90")
    process = json.loads(result.stdout)["processes"][0]
    assert process["phase"] in ("TRACE_PHASE_FINISHED", "TRACE_PHASE_FAILED"), process
    if process["phase"] == "TRACE_PHASE_FINISHED":
        steps = profiler_steps(next(Path(process["output"]).glob("*.pt.trace.json")))
        assert len(steps) == 100 and steps == list(range(steps[0], steps[0] + 100))
    else:
        assert process["error"], "a failed outcome says why"
    assert job.proc is not None and job.proc.poll() is None, "the job never noticed"
