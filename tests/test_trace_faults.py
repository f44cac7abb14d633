"""Traces asked to write where the traced process cannot: a read-only file system, a path under a regular
file, a folder the process has no permission on. What the daemon sees through the process's
``/proc/<pid>/root`` (a read-only file system, a file in the way) is refused in the answer, naming the
folder; what it cannot see (permissions inside a user namespace, a folder made read-only after the
answer) ends the trace failed, naming the folder and the reason. Either way the job must train on and
finish its steps, nothing half-written may stay behind, and the next trace into a writable folder must
succeed.

The unwritable folders are real. Tests run as root, where permission bits stop nothing: the read-only
case mounts a read-only tmpfs in the job's own mount namespace, and the permission case runs the job as
root of its own user namespace, which has no rights over a folder owned by a user it does not map.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

from harness import Daemon, Workload, read_line_until, wait_until

pytestmark = pytest.mark.torch

OTHER_UID = 54321  # owns the locked folder; no user namespace a job runs in maps it


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    return start_daemon("--process-keepalive-s", "3")  # heartbeats every second: steps are current


def mounted(folder: Path, options: str) -> List[str]:
    """A launcher running the job in its own mount namespace, a tmpfs mounted on *folder* there."""
    mount = f'mount -t tmpfs -o {options} tmpfs "$0" && exec "$@"'
    return ["unshare", "--mount", "--", "sh", "-c", mount, str(folder)]


def read_only(folder: Path) -> List[str]:
    return mounted(folder, "ro,size=16m")


def locked(folder: Path) -> List[str]:
    os.chown(folder, OTHER_UID, OTHER_UID)
    folder.chmod(0o500)
    return ["unshare", "--user", "--map-root-user", "--"]


def run_job(daemon: Daemon, launcher: Sequence[str]) -> Workload:
    job = Workload("train.py", daemon.plugin_env(), launcher=launcher)
    job.start()
    daemon.wait_registered(job.pid)
    return job


def step_of(daemon: Daemon, pid: int) -> int:
    return int((daemon.process(pid) or {}).get("current_step", 0))


def trace(daemon: Daemon, command: str, log_file: Path, *args: str) -> Dict:
    """Ask for a trace and wait for its outcome; a trace that never ends fails here."""
    reply = daemon.dyno_json(command, "--log-file", str(log_file), *args, "--wait", "--wait-timeout", "90")
    assert reply["commandStatus"] == "effective", reply
    assert reply["trace"]["done"], reply
    return reply["trace"]["processes"][0]  # type: ignore[no-any-return]


def refused_when_asked(daemon: Daemon, command: str, log_file: Path) -> str:
    """Ask for a trace the daemon must refuse for its folder; the process's detail."""
    reply = daemon.dyno_json(command, "--log-file", str(log_file), "--iterations", "3")
    assert (reply["commandStatus"], reply["reason"]) == ("ineffective", "REASON_OUTPUT_UNWRITABLE"), reply
    return reply["processes"][0]["detail"]  # type: ignore[no-any-return]


def outcome(daemon: Daemon, trace_id: str) -> Dict:
    result = daemon.dyno("--json", "trace", trace_id, "--wait", "--wait-timeout", "90")
    info = json.loads(result.stdout)
    assert info["done"], info
    return info["processes"][0]  # type: ignore[no-any-return]


def phases(process: Dict) -> List[str]:
    return [h["phase"].removeprefix("TRACE_PHASE_") for h in process["history"]]


def assert_failed_naming(process: Dict, folder: Path, reason: str, when_asked: bool = True) -> None:
    assert process["phase"] == "TRACE_PHASE_FAILED", process
    assert f"cannot write the trace into {folder}" in process["error"], process["error"]
    assert process["error"].endswith(reason), process["error"]
    assert not process["files"], process
    if when_asked:
        assert "RUNNING" not in phases(process), "refused when asked, not after recording for nothing"


def as_the_job_sees(job: Workload, path: Path) -> Path:
    """*path* in the job's mount namespace, where its tmpfs is."""
    return Path(f"/proc/{job.pid}/root{path}")


def left_behind(root: Path) -> List[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def finish(job: Workload) -> int:
    """Tell the job to stop; the number of steps it trained, once it exited cleanly."""
    assert job.proc is not None and job.proc.stdin is not None
    assert job.proc.poll() is None, "the job trains on"
    job.proc.stdin.close()
    steps = int(read_line_until(job.proc, "done steps=", timeout=60).split("=")[1])
    assert job.proc.wait(30) == 0
    return steps


def assert_next_trace_succeeds_and_the_job_finishes(daemon: Daemon, job: Workload, writable: Path) -> None:
    process = trace(daemon, "nputrace", writable, "--iterations", "2")
    assert process["phase"] == "TRACE_PHASE_FINISHED", process
    assert process["files"] and all(Path(f).stat().st_size > 0 for f in process["files"])
    assert not [p for p in writable.rglob("*") if p.name.endswith(".tmp")]
    before = step_of(daemon, job.pid)
    wait_until(lambda: step_of(daemon, job.pid) > before, what="the job to train on")
    assert finish(job) > before


def test_a_read_only_folder_is_refused_in_the_answer_and_the_job_trains_on(daemon, tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    job = run_job(daemon, read_only(folder))  # read-only in the job's mount namespace alone
    try:
        for command, log_file in (("nputrace", folder / "deeper"), ("gputrace", folder / "t.json")):
            assert (
                refused_when_asked(daemon, command, log_file)
                == f"{folder} is on a read-only file system there"
            )
        assert left_behind(as_the_job_sees(job, folder)) == []
        assert_next_trace_succeeds_and_the_job_finishes(daemon, job, tmp_path / "writable")
    finally:
        job.stop()


def test_a_folder_without_permission_fails_the_trace_when_asked_and_the_job_trains_on(daemon, tmp_path):
    """Root of its own user namespace is uid 0 to the daemon, yet has no rights over a folder of a user
    it does not map: the daemon cannot tell, and the plugin's refusal when asked says it."""
    folder = tmp_path / "traces"
    folder.mkdir()
    job = run_job(daemon, locked(folder))
    try:
        for command, log_file in (("nputrace", folder), ("gputrace", folder / "t.json")):
            process = trace(daemon, command, log_file, "--iterations", "3")
            assert_failed_naming(process, folder, "permission denied")
        assert_next_trace_succeeds_and_the_job_finishes(daemon, job, tmp_path / "writable")
    finally:
        job.stop()


def test_a_folder_under_a_regular_file_is_refused_in_the_answer(daemon, tmp_path):
    regular = tmp_path / "regular"
    regular.write_text("a file")
    job = run_job(daemon, [])
    try:
        for command, log_file in (("nputrace", regular / "traces"), ("gputrace", regular / "t.json")):
            assert refused_when_asked(daemon, command, log_file) == f"{regular} is not a folder there"
        assert regular.read_text() == "a file"
        assert_next_trace_succeeds_and_the_job_finishes(daemon, job, tmp_path / "writable")
    finally:
        job.stop()


@pytest.mark.parametrize("command", ["nputrace", "gputrace"])
def test_a_folder_made_read_only_before_the_write_fails_the_trace_saying_so(daemon, tmp_path, command):
    """Writable when the trace is accepted, read-only by the time it writes: the write's own failure
    must say the same, and Kineto's silent one too (gputrace)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    job = run_job(daemon, mounted(folder, "size=16m"))
    try:
        # The start lies 8 s ahead (400 steps of 20 ms or more): time for a few dyno calls and the
        # remount on a loaded machine, where each dyno takes about half a second.
        if command == "nputrace":
            start = ["--start-step", str(step_of(daemon, job.pid) + 400), "--iterations", "2"]
            log_file = folder
        else:
            start = ["--profile-start-time", str(int(time.time() * 1000) + 8000), "--duration-ms", "200"]
            log_file = folder / "t.json"
        reply = daemon.dyno_json(command, "--log-file", str(log_file), *start)
        assert reply["commandStatus"] == "effective", reply
        wait_until(
            lambda: (
                daemon.dyno_json("trace", reply["trace_id"])["processes"][0]["phase"] == "TRACE_PHASE_READY"
            ),
            what="the plugin to accept",
        )
        remount = ["nsenter", f"--mount=/proc/{job.pid}/ns/mnt", "mount", "-o", "remount,ro", str(folder)]
        subprocess.run(remount, check=True, timeout=30)
        process = outcome(daemon, reply["trace_id"])
        assert phases(process)[-2:] == ["RUNNING", "FAILED"], process  # it did start: the remount was in time
        assert_failed_naming(process, folder, "read-only file system", when_asked=False)
        assert left_behind(as_the_job_sees(job, folder)) == []
        assert_next_trace_succeeds_and_the_job_finishes(daemon, job, tmp_path / "writable")
    finally:
        job.stop()
