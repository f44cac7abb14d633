"""A trace whose folder the process could not write is refused in the answer, not answered effective and
failed once due (issue 34, from a new user): the daemon looks at the folder as the process sees it,
through ``/proc/<pid>/root`` and with its uid and groups. The process here is another user's (65534),
a real registered child of ``tests/workloads/registrants.py``."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

from dynolog.core.seen_by import unwritable
from harness import Daemon, Workload, stop_process, wait_until
from test_ipc_claims import AS_OTHER, OTHER_UID, needs_root, registrants, verdicts

pytestmark = needs_root


@pytest.fixture
def folders() -> Iterator[Path]:
    """``locked`` (root's, 0755) and ``open`` (1777, as /tmp) side by side, in a folder all may enter."""
    top = Path(tempfile.mkdtemp(prefix="mm-out-", dir="/tmp"))
    top.chmod(0o755)
    (top / "locked").mkdir(mode=0o755)
    (top / "open").mkdir()
    (top / "open").chmod(0o1777)
    yield top
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def other_users_process() -> Iterator[int]:
    process = subprocess.Popen([*AS_OTHER, "sleep", "600"])
    # setpriv changes its uid, then runs sleep: until then the process is still root's
    wait_until(lambda: Path(f"/proc/{process.pid}/exe").resolve().name == "sleep", what="sleep to start")
    yield process.pid
    stop_process(process)


def test_a_folder_is_judged_as_the_process_would_write_it(folders: Path, other_users_process: int) -> None:
    pid = other_users_process
    why = unwritable(pid, str(folders / "locked" / "traces" / "deeper"))  # made where missing: its parent
    assert (
        why
        == f"{folders / 'locked'} is not writable by uid {OTHER_UID} there (mode 0755, owner uid 0, group 0)"
    )
    assert unwritable(pid, str(folders / "open" / "traces")) is None
    (folders / "open" / "file").write_text("")
    assert (
        unwritable(pid, str(folders / "open" / "file" / "traces"))
        == f"{folders / 'open' / 'file'} is not a folder there"
    )
    assert unwritable(2**22 + 1, str(folders / "locked")) is None, "no such process: nothing said"
    # A link on the way would resolve against the daemon's root, not the process's: nothing said.
    (folders / "link").symlink_to(folders / "locked")
    assert unwritable(pid, str(folders / "link" / "traces")) is None


def test_nputrace_into_a_folder_the_process_cannot_write_is_ineffective_at_once(
    netns_holder: int, tmp_path: Path, folders: Path
) -> None:
    daemon = Daemon(tmp_path / "d", ["--ipc-socket-dir=", "--ipc-allowed-uids", f"0,{OTHER_UID}"])
    daemon.netns_of = netns_holder
    started: List[Workload] = []
    try:
        daemon.start()
        job = registrants(1, address="@dynolog", netns_of=netns_holder, launcher=AS_OTHER)
        started.append(job.start())
        (child,) = verdicts(job)["acked"]
        locked = folders / "locked" / "traces"
        refused = daemon.dyno_json("nputrace", "--start-step", "1000", "--log-file", str(locked))
        assert (refused["commandStatus"], refused["reason"]) == ("ineffective", "REASON_OUTPUT_UNWRITABLE")
        (outcome,) = refused["processes"]
        assert outcome["host_pid"] == child and not outcome["triggered"]
        assert f"is not writable by uid {OTHER_UID} there" in outcome["detail"]
        taken = daemon.dyno_json(
            "nputrace", "--start-step", "1000", "--log-file", str(folders / "open" / "t")
        )
        assert taken["commandStatus"] == "effective", taken
    finally:
        for workload in started:
            workload.stop()
        daemon.cleanup()
