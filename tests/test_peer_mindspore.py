"""MindSpore's own dynamic profiler, the published CPU wheel unchanged, in dyno mode against this daemon.

A small network trains on CPU (tests/workloads/mindspore_train.py) with ``MSMONITOR_USE_DAEMON=1``.
``DynamicProfilerMonitor`` forks MindSpore's monitor helper, ``worker_dyno_func``: ``init_dyno(rank)``
once, then ``poll_dyno()`` in a loop that polls again at once after an empty answer and sleeps its
``poll_interval`` (2 s) only after a config; it writes each config into shared memory. The training
process's ``step()`` applies it and reports the trace state with ``update_profiler_status`` at most once
a second, its steps as MindSpore counts them: the closed window ``[start, start + iterations - 1]``, also
the name of its output folder ``rank{R}_start{S}_stop{E}``.

MindSpore forks a helper only in the process that creates the node's shared memory
``/dev/shm/DynamicProfileShm<YYYYmmddHH>`` (named by the hour; any later process of that hour takes
itself for another rank of the same job): one job runs at a time here, and a killed job's memory is
removed with its helper.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

import peers
from harness import Daemon, parent_of, proc_stat, wait_until

# Steps between the job's step as the daemon last heard it and the first traced step. MindSpore reports
# its step at most once a second and the workload takes 20 steps a second: 80 steps leave the helper
# about three seconds to poll (it polls ten times a second) and MindSpore's next step() to apply it.
LEAD_STEPS = 80
ITERATIONS = 3
PACED_SAMPLE = 50  # datagrams counted
PACED_BOUND = 200  # datagrams a second from the job: the paced helper sends 10-35, an unpaced one thousands
TRACE_WAIT_S = 60


@pytest.fixture(scope="module")
def mindspore_python() -> Path:
    """MindSpore's virtual environment, made by the set-up step."""
    return peers.need(peers.MINDSPORE_PEER)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    # Plugins heartbeat every second: a job that stops being heard is forgotten within 3 s.
    daemon = Daemon(tmp_path_factory.mktemp("mindspore-daemon"), ("--process-keepalive-s", "3"))
    try:
        yield daemon.start()
    finally:
        daemon.cleanup()


class Jobs:
    """The MindSpore job of this module: one at a time, started again once a test has killed it."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.current: Optional[peers.PeerWorkload] = None

    def running(self) -> peers.PeerWorkload:
        job = self.current
        if job is None or job.proc is None or job.proc.poll() is not None:
            job = self.current = peers.mindspore_job(self.daemon)
        return job

    def abandon(self, job: peers.PeerWorkload) -> None:
        """After the job was killed: stop the helper MindSpore leaves polling, remove its memory."""
        helper = int(job.announced("helper"))
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)
        wait_until(lambda: not alive(helper), what=f"the helper {helper} to end")
        with contextlib.suppress(FileNotFoundError):
            (peers.MINDSPORE_SHM / job.announced("shm")).unlink()

    def stop(self) -> None:
        """Let the job end as training ends; :meth:`running` starts another."""
        if self.current is not None:
            self.current.stop()  # MindSpore's atexit handler ends the helper and removes the memory


@pytest.fixture(scope="module")
def jobs(mindspore_python: Path, daemon: Daemon) -> Iterator[Jobs]:
    """Once MindSpore's environment is there (built, or this module skipped)."""
    jobs = Jobs(daemon)
    try:
        yield jobs
    finally:
        jobs.stop()


@pytest.fixture
def job(jobs: Jobs) -> peers.PeerWorkload:
    return jobs.running()


# --- what the tests read -------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it has ended)."""
    try:
        return proc_stat(pid)[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> List[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if parent_of(int(stat.parent.name)) == pid:
                found.append(int(stat.parent.name))
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def shared_memory_text(job: peers.PeerWorkload) -> str:
    """The config MindSpore's helper last handed the training process (JSON, then zeros)."""
    written = (peers.MINDSPORE_SHM / job.announced("shm")).read_bytes()
    return written.split(b"\0", 1)[0].decode(errors="replace")


def folded(daemon: Daemon, job: peers.PeerWorkload) -> Optional[Dict[str, Any]]:
    """The job's record once its helper is folded into it."""
    record = daemon.process(job.pid)
    helper = int(job.announced("helper"))
    return record if record is not None and record.get("helper_pids") == [helper] else None


def folded_record(daemon: Daemon, job: peers.PeerWorkload) -> Dict[str, Any]:
    return wait_until(
        lambda: folded(daemon, job),
        timeout=30,
        what=f"job {job.pid} to list its helper {job.announced('helper')} in helper_pids",
    )


def stepping_record(daemon: Daemon, job: peers.PeerWorkload, past: int = 0) -> Dict[str, Any]:
    """The job's record once MindSpore has reported a step beyond *past*."""
    folded_record(daemon, job)
    return wait_until(
        lambda: (lambda r: r if r and r["current_step"] > past else None)(daemon.process(job.pid)),
        what=f"MindSpore to report a step beyond {past}",
    )


def rejected(daemon: Daemon) -> int:
    return int(daemon.dyno_json("status")["ipc"]["rejected_senders"])


# --- the tests -----------------------------------------------------------------------------------------


def test_a_mindspore_job_is_one_process_with_its_helper_folded_in(daemon, job):
    folded_record(daemon, job)
    # The plugin starts as MindSpore's import returns, and its first hello may still say "python";
    # its next heartbeat, a second later, names the framework.
    record = wait_until(
        lambda: (lambda r: r if r and r["backend"] == "mindspore" else None)(daemon.process(job.pid)),
        timeout=5,
        what="the job's backend to read mindspore",
    )
    assert record["versions"]["mindspore"] == "2.10.0"
    assert [p["pid"] for p in daemon.processes()] == [job.pid]
    assert set(record["clients"]) == {"CLIENT_KIND_PLUGIN", "CLIENT_KIND_MSMONITOR"}
    assert "nputrace" not in record["capabilities"], "MindSpore's own profiler takes nputrace"
    # MindSpore's shared memory started multiprocessing's resource tracker; it inherited
    # MSMONITOR_USE_DAEMON=1 but imports no framework, so it is nobody's job process.
    helper = int(job.announced("helper"))
    trackers = [pid for pid in children(job.pid) if "resource_tracker" in cmdline(pid)]
    assert trackers and set(children(job.pid)) == {helper, *trackers}
    header, *rows = daemon.dyno("processes", expect=0).stdout.splitlines()
    assert len(rows) == 1 and header.split()[-1] == "HELPERS" and rows[0].split()[-1] == str(helper)

    # npu-monitor goes to the plugin in the training process (pushed), not also to the helper.
    started = daemon.dyno_json("npu-monitor", "--npu-monitor-start", "--report-interval-s", "1")
    assert started["commandStatus"] == "effective", started
    assert "sent to 1 of 1" in started["message"], started["message"]
    wait_until(
        lambda: daemon.process(job.pid)["monitor_state"] == "MONITOR_STATE_RUNNING", what="the monitor to run"
    )
    stopped = daemon.dyno_json("npu-monitor", "--npu-monitor-stop")
    assert "sent to 1 of 1" in stopped["message"], stopped["message"]
    wait_until(
        lambda: daemon.process(job.pid)["monitor_state"] == "MONITOR_STATE_IDLE", what="the monitor to stop"
    )
    assert "NPU_MONITOR" not in shared_memory_text(job), "the helper was handed npu-monitor too"


def test_the_idle_helper_is_paced(daemon, job):
    """MindSpore's helper polls again as soon as an answer is empty; the plugin paces it. Counted in the
    datagrams that reach the daemon, which a loaded machine can only make fewer: the job sends 10 to 35
    a second (the paced polls, the heartbeat, MindSpore's status), an unpaced helper thousands. Its CPU
    share is a figure, measured by benchmarks/mindspore_helper.py."""
    folded_record(daemon, job)

    def received() -> int:
        return int(daemon.dyno_json("status")["ipc"]["received"])

    first, started = received(), time.monotonic()
    # The helper polls all along: the datagrams keep coming (a helper asleep would send two a second).
    wait_until(lambda: received() - first >= PACED_SAMPLE, what=f"{PACED_SAMPLE} datagrams from the job")
    polled, elapsed = received() - first, time.monotonic() - started
    print(f"MindSpore's idle helper: the job sent {polled / elapsed:.1f} datagrams/s")
    assert polled / elapsed < PACED_BOUND, f"{polled} datagrams in {elapsed:.2f} s: is the helper paced?"


def test_nputrace_records_the_steps_mindspore_records(daemon, job, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    start = stepping_record(daemon, job)["current_step"] + LEAD_STEPS
    reply = daemon.dyno_json(
        "nputrace",
        *("--start-step", str(start), "--iterations", str(ITERATIONS)),
        *("--log-file", str(traces), "--activities", "CPU"),
    )
    assert reply["commandStatus"] == "effective", reply
    assert "sent to 1 of 1" in reply["message"], reply["message"]
    assert [p["pid"] for p in reply["processes"] if p["triggered"]] == [job.pid]
    stop = start + ITERATIONS - 1
    window = f"rank0_start{start}_stop{stop}"

    wait = ("--wait", "--wait-timeout", str(TRACE_WAIT_S))
    waited = daemon.dyno("--json", "trace", reply["trace_id"], *wait, timeout=TRACE_WAIT_S + 30)
    info = json.loads(waited.stdout)
    assert info["done"], (
        f"the trace did not end within {TRACE_WAIT_S} s: {info['processes']}; MindSpore wrote "
        f"{sorted(p.name for p in traces.iterdir())}; the job printed {job.lines[-10:]}"
    )
    (process,) = info["processes"]
    assert process["phase"] == "TRACE_PHASE_FINISHED", process
    assert [Path(f).name for f in process["files"]] == [window]
    assert any((traces / window).rglob("*_ascend_ms/FRAMEWORK/*")), "MindSpore's profiler wrote no data"
    assert str(traces) in shared_memory_text(job), "the helper hands configs over in shared memory"
    assert (process["start_step"], process["stop_step"]) == (start, stop + 1), "the stop step is exclusive"
    shown = daemon.dyno("trace", reply["trace_id"], expect=0).stdout
    assert f"steps {start}-{stop}" in shown, shown
    assert reply["processes"][0]["expected_output"] == f"{traces / window}/", "not where MindSpore writes"


# What MindSpore 2.10 does with each (dynamic_profiler.py): a start step already begun is not traced; a
# start step of -1 ("the next step") fails its check start_step >= 0; a time-based trace (no
# --iterations) gives it stop = start + 0 - 1 < start. It drops them without a word, and a trace staged
# for them would hold the process busy for ever.
CANNOT_TAKE = {
    "passed": (("--start-step", "1", "--iterations", str(ITERATIONS)), "REASON_START_STEP_PASSED"),
    "next step": (("--start-step", "-1", "--iterations", str(ITERATIONS)), None),
    "time-based": (("--start-step", "100000", "--duration-ms", "500"), None),
}


@pytest.mark.parametrize("case", list(CANNOT_TAKE))
def test_a_trace_mindspore_cannot_take_is_not_staged(daemon, jobs, tmp_path, case):
    args, reason = CANNOT_TAKE[case]
    job = jobs.running()
    stepping_record(daemon, job, past=1)
    reply = daemon.dyno_json("nputrace", *args, "--log-file", str(tmp_path))
    if reply["commandStatus"] != "ineffective":
        jobs.stop()  # it holds the trace for ever: the next test gets a job of its own
    assert reply["commandStatus"] == "ineffective", reply
    assert not [p for p in reply["processes"] if p["triggered"]], reply
    (refused,) = reply["processes"]
    assert refused["reason"] not in ("REASON_TRACE_BUSY", "REASON_UNSPECIFIED"), refused
    assert reason is None or refused["reason"] == reason, refused
    assert refused["detail"], refused


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_job_leaves_no_job_process(daemon, jobs, tmp_path, sig):
    """Schedulers kill the job; MindSpore's helper, a daemon process of multiprocessing, polls on."""
    job = jobs.running()
    helper = int(job.announced("helper"))
    try:
        folded_record(daemon, job)
        assert job.proc is not None
        os.kill(job.pid, sig)
        job.proc.wait(30)
        wait_until(
            lambda: not daemon.processes(), what=f"the killed job {job.pid} and its helper to be forgotten"
        )
        assert alive(helper), "MindSpore left its helper running, and it still polls"
        refused = rejected(daemon)
        wait_until(lambda: rejected(daemon) > refused, what="the orphaned helper's polls to be refused")

        reply = daemon.dyno_json(
            "nputrace", "--start-step", "1000000", "--iterations", "3", "--log-file", str(tmp_path)
        )
        assert reply["commandStatus"] == "ineffective", reply
        assert not reply.get("processes_matched"), reply
        refused = rejected(daemon)
        wait_until(lambda: rejected(daemon) >= refused + 3, what="the orphaned helper to poll again")
        assert str(tmp_path) not in shared_memory_text(job), "the orphaned helper was handed the trace"
        assert daemon.processes() == []
    finally:
        jobs.abandon(job)
