"""Ctrl-C in ``dyno``, against a real daemon: the user's stop, never Python's traceback.

Waiting for the daemon or for processes, dyno ends as SIGINT ends a program (a shell loop running it
stops too). Following a trace (``--wait``), it stops following and says that the trace goes on, with
the commands that show and cancel it: the trace itself is the daemon's, untouched.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Callable

from harness import Daemon, Workload, read_line_until, rest_of_output, stop_process, wait_until


def asked_the_daemon(pid: int) -> bool:
    """Whether dyno has loaded gRPC's core: it does so in its command, past the interpreter's start
    and its own imports (where a Ctrl-C is Python's alone). The signal may still land while the core
    initialises, where Cython turns it into an ImportError: dyno must take that for the Ctrl-C too."""
    return "cygrpc" in Path(f"/proc/{pid}/maps").read_text()


def test_ctrl_c_while_waiting_for_processes_ends_dyno_as_sigint_does_without_a_traceback(
    daemon: Daemon,
) -> None:
    dyno = subprocess.Popen(
        daemon.dyno.command("processes", "--wait-for", "5"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: asked_the_daemon(dyno.pid), what="dyno to ask the daemon")
        dyno.send_signal(signal.SIGINT)
        printed = rest_of_output(dyno, timeout=10)
    finally:
        ended = stop_process(dyno)
    assert (ended, printed) == (-signal.SIGINT, "")


def test_ctrl_c_while_following_a_trace_stops_following_and_leaves_the_trace(
    daemon: Daemon, start_workload: Callable[..., Workload], tmp_path: Path
) -> None:
    job = start_workload("idle.py", daemon.plugin_env(), "--init")  # counts no steps: the trace waits
    wait_until(lambda: daemon.process(job.pid), what="registration")
    dyno = subprocess.Popen(
        daemon.dyno.command(
            *("nputrace", "--start-step", "500", "--iterations", "1", "--log-file", str(tmp_path), "--wait")
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        read_line_until(dyno, f"  pid {job.pid} (rank -): ready", timeout=20)  # following it
        dyno.send_signal(signal.SIGINT)
        printed = rest_of_output(dyno, timeout=10)
    finally:
        ended = stop_process(dyno)

    assert ended == 130, printed
    found = re.fullmatch(
        r"dyno: stopped following trace (\S+) \(Ctrl-C\); the trace goes on: dyno trace \1 shows it, "
        r"dyno trace \1 --cancel cancels it\n",
        printed,
    )
    assert found, printed
    (process,) = daemon.dyno_json("trace", found[1])["processes"]
    assert (process["pid"], process["phase"]) == (job.pid, "TRACE_PHASE_READY")
