"""A PyTorch job that imports torch_npu, run with ``MSMONITOR_USE_DAEMON=1``: torch_npu's own dynamic
profiler -- the published wheel's Python, unchanged (tests/peers.py) -- forks its monitor helper, which
polls this daemon through ``IPCMonitor``, while the plugin runs in the training process itself.

Only the C extension and the device profiler are stood in for (tests/stand_ins/torch_npu). The job must
be one process to `dyno`, each command must reach it once, by the path that runs it: npu-monitor the
plugin, nputrace torch_npu's own profiler (through the helper).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import peers
from fake_mspti import fake_mspti_build
from harness import Daemon, Workload, parent_of, read_until, stop_process, wait_until

pytestmark = pytest.mark.torch  # train.py: a real PyTorch job, torch_npu's stand-in imported

# torch_npu's helper prints this (stdout, dyno mode) each time a poll brought it a command.
HELPER_TOOK_A_COMMAND = "Dynolog profiler process load json success"


@pytest.fixture(scope="module")
def torch_npu_path() -> Path:
    return peers.need(peers.TORCH_NPU_PEER)


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    return start_daemon("--process-keepalive-s", "3")


@pytest.fixture
def job(daemon, start_workload, torch_npu_path) -> Workload:
    fake = fake_mspti_build.shared_library()
    env = {
        **daemon.client_env(),
        "MSMONITOR_USE_DAEMON": "1",
        "MSMONITOR_IPC_SOCKET_DIR": str(daemon.socket_dir),  # where $HOME/dynolog.sock would be
        "MSMONITOR_MSPTI_LIB": fake,
        **fake_mspti_build.settings(count=10**9, names=8),
        "RANK": "0",
        "PYTHONPATH": os.pathsep.join([str(torch_npu_path), os.environ.get("PYTHONPATH", "")]),
    }
    return start_workload("train.py", env, "--import", "torch_npu", "--step-ms", "20")


def one_process_with_its_helper(daemon: Daemon, job: Workload) -> Dict[str, Any]:
    """The job's record once the helper is folded into it (either may register first)."""
    processes = daemon.processes()
    record = next((p for p in processes if p["pid"] == job.pid), {})
    return record if record.get("helper_pids") and len(processes) == 1 else {}


def next_kernels_of(daemon: Daemon, pid: int, timeout: float = 60) -> Dict[str, Any]:
    """The Kernel kind of the next monitor report of *pid* that has one (the first may close before
    the library delivered a record), as the daemon streams it to `dyno --json npu-monitor --watch`."""
    watch = subprocess.Popen(
        daemon.dyno.command("--json", "npu-monitor", "--watch"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def kernels(line: str) -> Optional[Dict[str, Any]]:
        report = json.loads(line) if line.startswith("{") else {"pid": None}
        kinds = report["kinds"] if report["pid"] == pid else []
        return next((k for k in kinds if k["kind"] == "Kernel"), None)

    try:
        return read_until(watch, kernels, timeout, f"report of pid {pid} with a Kernel kind")
    finally:
        stop_process(watch)


def output_after_stop(job: Workload) -> List[str]:
    """Everything the job (and its helper, which shares its stdout) printed, once both have exited."""
    assert job.proc is not None
    output, _ = job.proc.communicate(timeout=60)  # closing stdin is the job's signal to finish
    return output.splitlines()


def test_a_torch_npu_job_is_one_process_and_each_command_reaches_it_once(daemon, job, tmp_path):
    record = wait_until(lambda: one_process_with_its_helper(daemon, job), what="the helper folded in")
    (helper,) = record["helper_pids"]
    assert parent_of(helper) == job.pid, "the helper is the process torch_npu forked"
    assert sorted(record["clients"]) == ["CLIENT_KIND_MSMONITOR", "CLIENT_KIND_PLUGIN"]
    assert "nputrace" not in record["capabilities"], "the plugin leaves nputrace to torch_npu"

    # npu-monitor: pushed to the plugin in the training process, never staged for the helper (torch_npu
    # would start the monitor a second time through enable_dyno_npu_monitor).
    started = daemon.dyno_json(
        "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1", "--mspti-activity-kind", "Kernel"
    )
    assert started["commandStatus"] == "effective", started
    assert [p["pid"] for p in started["processes"] if p["triggered"]] == [job.pid]
    assert len(started["processes"]) == 1
    wait_until(
        lambda: (daemon.process(job.pid) or {}).get("monitor_state") == "MONITOR_STATE_RUNNING",
        what="the plugin's monitor to run",
    )
    # What it measured reaches the daemon: the fake libmspti's kernels, Kernel_0..Kernel_7.
    kernel = next_kernels_of(daemon, job.pid)
    names = {n["name"] for n in kernel["top"]}
    assert kernel["count"] > 0 and names and names <= {f"Kernel_{i}" for i in range(8)}, kernel
    daemon.dyno_json("npu-monitor", "--npu-monitor-stop")
    wait_until(
        lambda: (daemon.process(job.pid) or {}).get("monitor_state") == "MONITOR_STATE_IDLE",
        what="the monitor to stop",
    )

    # nputrace: staged for the helper, taken by torch_npu's own profiler at the requested step.
    traces = tmp_path / "traces"
    # The helper polls every second or two, then the job reads its shared memory at a step: ~4 s ahead.
    start = (daemon.process(job.pid) or {})["current_step"] + 200
    reply = daemon.dyno_json(
        *("nputrace", "--start-step", str(start), "--iterations", "2", "--log-file", str(traces)),
        *("--record-shapes", "--with-stack"),
    )
    assert reply["commandStatus"] == "effective", reply
    assert [p["pid"] for p in reply["processes"] if p["triggered"]] == [job.pid]
    done = daemon.dyno("--json", "trace", reply["trace_id"], "--wait", "--wait-timeout", "45")
    (outcome,) = json.loads(done.stdout)["processes"]
    assert outcome["phase"] == "TRACE_PHASE_FINISHED", outcome
    (written,) = traces.iterdir()
    assert written.name.endswith("_ascend_pt") and [Path(f).name for f in outcome["files"]] == [written.name]
    info = json.loads((written / "profiler_info.json").read_text())
    assert (outcome["start_step"], outcome["stop_step"]) == (start, start + 2)
    assert info["steps"][0] == start, info
    # torch_npu's own parser read our KEY=VALUE text: the options reached its profiler.
    assert info["options"]["record_shapes"] is True and info["options"]["with_stack"] is True, info
    assert info["options"]["profile_memory"] is False, info

    lines = output_after_stop(job)
    assert sum(HELPER_TOOK_A_COMMAND in line for line in lines) == 1, "\n".join(lines)
    assert not [line for line in lines if "Traceback" in line], "\n".join(lines)


def test_the_helper_of_a_killed_torch_npu_job_is_not_a_job_process(daemon, job):
    record = wait_until(lambda: one_process_with_its_helper(daemon, job), what="the helper folded in")
    (helper,) = record["helper_pids"]
    try:
        job.kill()
        wait_until(lambda: not daemon.processes(), what="the killed job to be forgotten")
        assert os.path.exists(f"/proc/{helper}"), "torch_npu's helper outlives its job, and polls on"
        rejected = daemon.dyno_json("status")["ipc"]["rejected_senders"]
        wait_until(
            lambda: daemon.dyno_json("status")["ipc"]["rejected_senders"] > rejected,
            what="its polls to be refused",
        )
        refused = daemon.dyno_json("nputrace", "--start-step", "-1", "--log-file", "/tmp")
        assert refused["commandStatus"] == "ineffective" and not refused["processes"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)
