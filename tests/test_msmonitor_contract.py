"""torch_npu's and MindSpore's own dynamic profilers, unchanged, against this daemon.

A stand-in (tests/workloads/framework_dyno.py) replays the calls those frameworks make on
IPCMonitor.PyDynamicMonitorProxy; the test checks what `dyno` sees at each point.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Dict

import pytest

from fake_mspti import fake_mspti_build
from harness import Daemon, read_line_until, wait_until


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    return start_daemon("--process-keepalive-s", "3")  # plugins heartbeat every second


def framework_env(daemon: Daemon, **extra: str) -> Dict[str, str]:
    return {
        **daemon.client_env(),
        "MSMONITOR_USE_DAEMON": "1",
        "MSMONITOR_IPC_SOCKET_DIR": str(daemon.socket_dir),  # where $HOME/dynolog.sock would be
        "RANK": "0",
        **extra,
    }


def helper_of(daemon: Daemon, parent: int) -> Dict:
    return next(
        (
            p
            for p in daemon.processes()
            if "CLIENT_KIND_MSMONITOR" in p["clients"] and parent in p["ancestors"]
        ),
        {},
    )


def trace_configs(job) -> Dict[str, str]:
    """The next config the framework stand-in parsed, as it printed it."""
    while True:
        line = read_line_until(job.proc, "config ", timeout=60)
        return json.loads(line[len("config ") :])


@pytest.mark.parametrize("flavour", ["torch_npu", "mindspore"])
def test_framework_takes_nputrace_through_its_monitor_process(daemon, start_workload, tmp_path, flavour):
    traces = tmp_path / "traces"
    traces.mkdir()
    job = start_workload("framework_dyno.py", framework_env(daemon), flavour)
    helper = wait_until(lambda: helper_of(daemon, job.pid), what="init_dyno from the helper process")
    assert helper["rank"] == 0 and helper["devices"] == [0]  # init_dyno(rank): msMonitor's npu id
    rank = wait_until(
        lambda: (lambda p: p if p and "nputrace" not in p["capabilities"] else None)(daemon.process(job.pid)),
        what="the training process to leave nputrace to the framework",
    )
    assert rank["clients"] == ["CLIENT_KIND_PLUGIN"]

    reply = daemon.dyno_json(
        "nputrace",
        "--start-step",
        "-1",
        "--iterations",
        "3",
        "--log-file",
        str(traces),
        "--record-shapes",
        "--rank-list",
        "0",
    )
    assert reply["commandStatus"] == "effective"
    taken = [p["pid"] for p in reply["processes"] if p["triggered"]]
    assert taken == [helper["pid"]]

    config = trace_configs(job)
    assert config["PROFILE_START_STEP"] == "-1" and config["ACTIVITIES_ITERATIONS"] == "3"
    assert config["PROFILE_RECORD_SHAPES"] == "true" and config["PROFILE_RANK_LIST"] == "0"
    assert config["REQUEST_TRACE_ID"] == reply["trace_id"]
    assert config["ACTIVITIES_LOG_FILE"] == str(traces)

    done = daemon.dyno("--json", "trace", reply["trace_id"], "--wait", "--wait-timeout", "60")
    process = json.loads(done.stdout)["processes"][0]
    assert process["phase"] == "TRACE_PHASE_FINISHED", process
    written = sorted(p.name for p in traces.iterdir())
    assert [Path(f).name for f in process["files"]] == written
    assert (
        written[0].endswith("_ascend_pt") if flavour == "torch_npu" else written[0].startswith("rank0_start")
    )
    status = daemon.dyno_json("status")
    assert (status["nputrace"], status["npumonitor"]) == ("Idle", "Idle")
    assert "start_step" not in status  # msMonitor's getStatus carries them only while Ready or Running


def test_framework_npu_monitor_runs_in_the_training_process(daemon, start_workload):
    try:
        library = fake_mspti_build.shared_library()
    except fake_mspti_build.NoCompiler as exc:
        pytest.skip(str(exc))
    env = framework_env(
        daemon, MSMONITOR_MSPTI_LIB=library, **fake_mspti_build.settings(count=10**9, names=8)
    )
    job = start_workload("framework_dyno.py", env, "torch_npu")
    wait_until(lambda: helper_of(daemon, job.pid), what="init_dyno from the helper process")
    reply = daemon.dyno_json(
        "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1", "--mspti-activity-kind", "Kernel"
    )
    assert reply["commandStatus"] == "effective"
    wait_until(
        lambda: (daemon.process(job.pid) or {}).get("monitor_state") == "MONITOR_STATE_RUNNING",
        what="the training process to monitor",
    )
    assert daemon.dyno_json("status")["npumonitor"] == "Running"
    daemon.dyno_json("npu-monitor", "--npu-monitor-stop")
    wait_until(
        lambda: (daemon.process(job.pid) or {}).get("monitor_state") == "MONITOR_STATE_IDLE",
        what="the monitor to stop",
    )


def test_a_helper_whose_training_process_was_killed_is_forgotten(daemon, start_workload):
    """Schedulers kill the job; the framework's forked helper polls on, and must not be a job process."""
    job = start_workload("framework_dyno.py", framework_env(daemon), "mindspore")
    helper = wait_until(lambda: helper_of(daemon, job.pid), what="the helper to register")
    try:
        job.kill()
        wait_until(lambda: daemon.process(helper["pid"]) is None, what="the helper to be forgotten")
        assert os.path.exists(f"/proc/{helper['host_pid']}"), "the helper still runs, and still polls"
        status = daemon.dyno_json("status")
        wait_until(
            lambda: daemon.dyno_json("status")["ipc"]["rejected_senders"] > status["ipc"]["rejected_senders"],
            what="its polls to be refused",
        )
        assert daemon.process(helper["pid"]) is None, "it did not register again"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper["host_pid"], signal.SIGKILL)
