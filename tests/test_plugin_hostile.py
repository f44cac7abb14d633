"""Whatever sits at the daemon's address, the job runs its steps, exits 0, keeps its memory, and its link
comes back when a real daemon does.

The fake daemon (``workloads/hostile_daemon.py``) binds the daemon's address itself — the plugin takes
datagrams only from there — and floods the job (``workloads/step_loop.py``, a loop of ``step()`` with
the plugin's agent running) while the job steps: with valid commands and acks, or with garbage, until
the plugin took thousands of them. Then it goes, a real ``dynolog`` starts at the same address, and
must list the job. Neither speed nor memory is asserted here: on a loaded machine both follow the
scheduler as much as the code; benchmarks/plugin_hostile.py measures them (RSS growth goal <= 20 MiB).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from harness import WORKLOADS, Daemon, read_line_until, stop_process, wait_until

# Datagrams the plugin must take before the flood ends: thousands of commands or of garbage; for the
# stuck daemon, more answers than fill its queue (net.unix.max_dgram_qlen: 10 here, 512 on many hosts)
# plus the ~280 wake-ups of the link thread that fill its wake socketpair.
TARGET = {"flood": 6000, "garbage": 4000, "flood-deaf": 1000}
HOSTILE_MAX_S = 30.0  # a loaded machine floods more slowly; the flood ends here whatever it reached
STALLED = 50  # sends in a row that found no room for 0.2 s each (10 s): the plugin no longer reads
RUN_S = 0.5  # the job steps in runs of this long, between which the flood's progress is read


class Proc:
    """A child with line-by-line stdin, stdout read by the harness, stderr kept apart in a file."""

    def __init__(self, cmd: list, env: Dict[str, str], stderr: Path) -> None:
        self.stderr_path = stderr
        with stderr.open("w") as err:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env
            )

    def say(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer(self, prefix: str, timeout: float = 60.0) -> str:
        return read_line_until(self.proc, prefix, timeout).split(" ", 1)[1].strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_process(self.proc, timeout=5)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short socket directory: a socket path may not exceed 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="mm", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def job_run(job: Proc) -> str:
    job.say(f"run {RUN_S}")
    return job.answer("result", RUN_S + 60)


def run_against(mode: str, sockets: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSMONITOR_", "KINETO_"))}
    env["KINETO_IPC_SOCKET_DIR"] = str(sockets)
    fake = Proc(
        [sys.executable, str(WORKLOADS / "hostile_daemon.py"), str(sockets), mode], env, tmp_path / "fake"
    )
    job = Proc([sys.executable, str(WORKLOADS / "step_loop.py")], env, tmp_path / "job")
    daemon = Daemon(tmp_path / "daemon", socket_dir=sockets)
    try:
        pid = int(job.answer("ready").split("pid=")[1])
        fake.answer("ready")  # the job's first hello reached it
        fake.say("go")
        runs = [json.loads(job_run(job))]
        deadline = time.monotonic() + HOSTILE_MAX_S
        while True:  # the job steps while the fake floods, until the plugin took enough or stopped taking
            fake.say("count")
            sent = json.loads(fake.answer("count"))
            assert sent.get("timeouts_in_a_row", 0) < STALLED, (
                f"the plugin stopped reading its socket: {sent}"
            )
            if sent.get("datagrams", 0) >= TARGET[mode] or time.monotonic() > deadline:
                break
            runs.append(json.loads(job_run(job)))
        fake.proc.stdin.close()  # type: ignore[union-attr]
        stats = json.loads(fake.answer("stats", 30))
        assert stats["sent"].get("datagrams", 0) > 0, stats

        job.say("steps 1000")
        assert int(job.answer("done")) == runs[-1]["count"] + 1000, "the job's steps all counted"

        daemon.start()  # the fake removed its socket on the way out
        wait_until(
            lambda: any(p["pid"] == pid for p in daemon.processes()),
            timeout=30,  # the next heartbeat is due within 5 s; the rest is for a loaded machine
            what=f"the real daemon to list the job after the {mode}",
        )

        job.proc.stdin.close()  # type: ignore[union-attr]
        assert job.proc.wait(15) == 0
        assert "Traceback" not in job.stderr, job.stderr
    finally:
        job.stop()
        fake.stop()
        daemon.stop()


@pytest.mark.parametrize("mode", ["flood", "garbage"])
def test_the_job_survives_a_hostile_daemon_and_its_link_recovers(
    mode: str, sockets: Path, tmp_path: Path
) -> None:
    run_against(mode, sockets, tmp_path)


def test_the_job_survives_a_stuck_flooding_daemon_and_its_link_recovers(
    sockets: Path, tmp_path: Path
) -> None:
    run_against("flood-deaf", sockets, tmp_path)
