"""What a job writes for a trace, in a real PyTorch job: confined to the daemon's --trace-root when it
writes, not only when the command arrives (a folder swapped for a link in between must not send the
trace outside), and readable by its owner and group only (files 0640, folders 0750) under umask 022."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Iterator, List

import pytest

from harness import Daemon, Workload
from test_dynamic import Controller, window_of

pytestmark = pytest.mark.torch

UMASK_022 = ["sh", "-c", 'umask 022 && exec "$@"', "umask"]  # as most jobs run


@contextlib.contextmanager
def job_under_umask_022(daemon: Daemon) -> Iterator[Workload]:
    job = Workload("train.py", daemon.plugin_env(), ("--step-ms", "10"), launcher=UMASK_022)
    job.start()
    try:
        daemon.wait_registered(job.pid)
        yield job
    finally:
        job.stop()


def modes(folder: Path) -> List[str]:
    """Each path under *folder* (and itself) with its mode, where it is not 0640 (files) or 0750."""
    wrong = []
    for path in [folder, *folder.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode != (0o750 if path.is_dir() else 0o640):
            wrong.append(f"{path.relative_to(folder.parent)} {mode:o}")
    return wrong


def test_a_folder_swapped_for_a_link_after_acceptance_cannot_send_a_window_outside_the_root(
    start_daemon, tmp_path
):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    daemon = start_daemon("--trace-root", str(root))
    with job_under_umask_022(daemon) as job:
        session = Controller(daemon, "--pid", str(job.pid), "--output", str(root / "job"))
        try:
            assert session.answer()["ok"]
            # A window written as asked, owner and group only.
            assert window_of(session.send("start"))["phase"] == "TRACE_PHASE_RUNNING"
            written = window_of(session.send("stop"))
            assert written["phase"] == "TRACE_PHASE_FINISHED", written
            assert modes(Path(written["output"])) == []

            # The folder accepted is swapped for a link out of the root while the next window records.
            assert window_of(session.send("start"))["phase"] == "TRACE_PHASE_RUNNING"
            (root / "job").rename(root / "job.accepted")
            (root / "job").symlink_to(outside)
            refused = window_of(session.send("stop"))
            assert refused["phase"] == "TRACE_PHASE_FAILED", refused
            assert "was replaced while the trace recorded" in refused["error"], refused["error"]
            assert list(outside.iterdir()) == [], "nothing written outside the root"
            assert len(list((root / "job.accepted").glob("PROF_*"))) == 2, "written into the folder accepted"
        finally:
            session.close()


def test_a_link_below_the_root_is_refused_when_the_trace_is_accepted(start_daemon, tmp_path):
    """The daemon resolves the link (inside the root: accepted); the job, which writes later, follows no
    link below the root at all."""
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "link").symlink_to(root / "real")
    daemon = start_daemon("--trace-root", str(root))
    with job_under_umask_022(daemon):
        reply = daemon.dyno_json(
            "nputrace",
            "--iterations",
            "1",
            "--log-file",
            str(root / "link"),
            "--wait",
            "--wait-timeout",
            "90",
        )
    process = reply["trace"]["processes"][0]
    assert process["phase"] == "TRACE_PHASE_FAILED", process
    assert "'link' is a symbolic link below the --trace-root: refused" in process["error"], process["error"]
    assert list((root / "real").iterdir()) == []


def test_traces_are_0640_in_0750_folders_under_umask_022(start_daemon, tmp_path):
    daemon = start_daemon()
    with job_under_umask_022(daemon):
        nputrace = daemon.dyno_json(
            "nputrace", "--iterations", "1", "--analyse", "--log-file", str(tmp_path / "npu"), "--wait"
        )
        gputrace = daemon.dyno_json(
            "gputrace", "--iterations", "1", "--log-file", str(tmp_path / "gpu" / "t.json"), "--wait"
        )
    run = nputrace["trace"]["processes"][0]
    assert run["phase"] == "TRACE_PHASE_FINISHED", run
    assert modes(tmp_path / "npu") == []  # the folder made for it, the run's folder, trace and summaries
    (file,) = gputrace["trace"]["processes"][0]["files"]
    assert stat.S_IMODE(os.stat(file).st_mode) == 0o640
