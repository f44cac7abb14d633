"""Another local user takes the daemon's IPC address first (hostile input, round three, item 8).

A squatter bound to the daemon's address, running as another uid, must hear nothing from a plugin (no
hello: pid, ancestors, job, rank, host), the plugin must say who holds the address and keep retrying as for
an absent daemon, and a daemon started second must name the holder. Both kinds of address: a pathname in a
private ``--ipc-socket-dir``, and the abstract ``@dynolog@`` inside a private network namespace (never the
machine's own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from harness import BIN, Daemon, Workload, nsenter, rest_of_output, wait_until

SQUATTER_UID = 65534  # nobody
AS_SQUATTER = ["setpriv", f"--reuid={SQUATTER_UID}", f"--regid={SQUATTER_UID}", "--clear-groups"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="a squatter of another uid needs root and setpriv(1) to become that uid",
)


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A private socket directory the squatter's uid may bind in (sticky, like /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="mm", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def second_daemon(args: List[str], log: Path, netns_of: int = 0) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    cmd = [str(BIN / "dynolog"), "--enable-ipc-monitor", "--port", "0", "--log-file", str(log), *args]
    return subprocess.run(
        nsenter(netns_of, cmd) if netns_of else cmd, capture_output=True, text=True, timeout=30
    )


def squat_then_leave(
    squatter: Workload, job_env: Dict[str, str], tmp_path: Path, daemon_args: List[str]
) -> Workload:
    """The plugin meets the squatter: it sends nothing, logs who holds the address; a daemon started
    second names the holder. Returns the job, still retrying."""
    logs = tmp_path / "plugin-logs"
    netns_of = squatter.netns_of or 0
    job = Workload(
        "idle.py", {**job_env, "MSMONITOR_USE_DAEMON": "1", "MSMONITOR_LOG_PATH": str(logs)}, ["--init"]
    )
    job.netns_of = squatter.netns_of
    job.start()
    log = logs / f"msmonitor_plugin_{job.pid}.log"
    holder = f"uid {SQUATTER_UID}, pid {squatter.pid}"
    wait_until(lambda: log.exists() and holder in log.read_text(), what="the plugin to name the squatter")
    warning = [line for line in log.read_text().splitlines() if holder in line]
    assert len(warning) == 1 and "nothing is sent to it" in warning[0], warning

    second = second_daemon(daemon_args, tmp_path / "second.log", netns_of)
    assert second.returncode == 1, second.stderr
    assert f"(held by {holder})" in second.stderr
    assert f"(held by {holder})" in (tmp_path / "second.log").read_text()

    assert squatter.proc is not None and squatter.proc.stdin is not None
    squatter.proc.stdin.close()
    heard = rest_of_output(squatter.proc)
    assert "done" in heard and "heard" not in heard, f"the squatter heard from the plugin:\n{heard}"
    squatter.stop()
    assert len([line for line in log.read_text().splitlines() if holder in line]) == 1, "one warning"
    return job


def test_a_squatter_on_the_socket_dir_hears_nothing_and_is_named(sockets: Path, tmp_path: Path):
    squatter = Workload("squatter.py", {}, [str(sockets / "dynolog")], launcher=AS_SQUATTER).start()
    job = squat_then_leave(
        squatter,
        {"KINETO_IPC_SOCKET_DIR": str(sockets)},
        tmp_path,
        ["--ipc-socket-dir", str(sockets), "--msmonitor-socket-dir", str(sockets)],
    )
    daemon = Daemon(tmp_path / "d", socket_dir=sockets)
    try:
        daemon.start()  # the squatter gone, the plugin's retries reach the daemon
        wait_until(lambda: daemon.process(job.pid) is not None, what="the plugin to register after all")
    finally:
        job.stop()
        daemon.stop()


def test_a_squatter_on_the_abstract_name_hears_nothing_and_is_named(netns_holder: int, tmp_path: Path):
    squatter = Workload("squatter.py", {}, ["@dynolog"], netns_of=netns_holder, launcher=AS_SQUATTER).start()
    job = squat_then_leave(
        squatter, {}, tmp_path, ["--ipc-socket-dir=", "--msmonitor-socket-dir", str(tmp_path)]
    )
    daemon = Daemon(tmp_path / "d", ["--ipc-socket-dir="], netns_of=netns_holder)
    try:
        daemon.start()
        assert "ipc=@dynolog@" in daemon.ready_line
        wait_until(lambda: daemon.process(job.pid) is not None, what="the plugin to register after all")
    finally:
        job.stop()
        daemon.cleanup()
