"""What a registering process says about itself is not what the daemon acts on (issue 34, items 6 and 7).

* ``--pids`` selects a process by the ancestors the daemon reads from ``/proc``: a process of another
  allowed uid that claims a victim's pid as its ancestor (or as its own pid) is not selected by
  ``--pids <victim>``, while the victim's real child is; inside a pid namespace, by the ancestors'
  pids there, read from ``/proc`` as well.
* Registrations are capped (``--max-ipc-clients``, and half of it per uid where several are allowed),
  refused by name in the log past it, and each holds
  a pidfd only while descriptors stay free for the gRPC port: many registering processes under a low
  open files limit leave ``dyno status`` answering.

Every registering process here is a real child of ``tests/workloads/registrants.py``, each with its own
pid, since the kernel stamps every datagram with its sender's pid.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import pytest

from dynolog.core.descriptors import RESERVED
from harness import Daemon, Workload, rest_of_output
from msmonitor_contract import wire

OTHER_UID = 65534  # nobody
AS_OTHER = ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups"]

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="a process of another uid needs root and setpriv(1) to become that uid",
)
needs_pid_namespace = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a pid namespace needs root and unshare(1)",
)


def verdicts(workload: Workload) -> Dict[str, List[int]]:
    """The ready line's acked and refused child pids."""
    fields = dict(part.split("=", 1) for part in workload.ready.split()[1:])
    return {key: [int(p) for p in fields[key].split(",") if p] for key in ("acked", "refused")}


def registrants(count: int, *args: str, address: str, **options: object) -> Workload:
    """*count* processes registering at *address*, each as ``registrants.py`` makes it claim *args*."""
    return Workload("registrants.py", {}, [address, str(count), *args], **options)  # type: ignore[arg-type]


# A trace's command line, but for its --pids: one that stays pending (it starts at step 1000).
NPUTRACE = ("nputrace", "--start-step", "1000")
GPUTRACE = ("gputrace", "--iterations", "1")  # staged for stock Kineto's next poll


def selected(
    daemon: Daemon, tmp_path: Path, pids: Sequence[int], trace: Sequence[str] = NPUTRACE
) -> List[int]:
    """The host pids a trace with ``--pids`` *pids* was sent to."""
    reply = daemon.dyno_json(*trace, "--pids", ",".join(map(str, pids)), "--log-file", str(tmp_path / "t"))
    return sorted(p["host_pid"] for p in reply.get("processes", []) if p["triggered"])


def heard(workload: Workload) -> str:
    """Everything the workload's children printed (what the daemon sent them), once it is stopped."""
    assert workload.proc is not None and workload.proc.stdin is not None
    workload.proc.stdin.close()
    return rest_of_output(workload.proc)


@needs_root
@pytest.mark.parametrize("kineto", [False, True], ids=["hello", "kineto-req"])
def test_a_claimed_ancestor_selects_nothing(netns_holder: int, tmp_path: Path, kineto: bool):
    """The attack of item 6: with ``--ipc-allowed-uids`` naming another user, that user's process claims
    the victim's pid as its ancestor and as its own; ``--pids <victim>`` selects the victim's real child,
    never the claimant. The abstract name in a private network namespace, so both uids can reach it."""
    daemon = Daemon(tmp_path / "d", ["--ipc-socket-dir=", "--ipc-allowed-uids", f"0,{OTHER_UID}"])
    daemon.netns_of = netns_holder
    started: List[Workload] = []
    mode = ["--kineto"] if kineto else []
    try:
        daemon.start()
        victim = registrants(1, *mode, address="@dynolog", netns_of=netns_holder)
        started.append(victim.start())
        claims = ["--claim-ancestors", str(victim.pid), "--claim-pid", str(victim.pid), *mode]
        claimant = registrants(1, *claims, address="@dynolog", netns_of=netns_holder, launcher=AS_OTHER)
        started.append(claimant.start())
        (child,), (claimer,) = verdicts(victim)["acked"], verdicts(claimant)["acked"]
        assert selected(daemon, tmp_path, [victim.pid], GPUTRACE if kineto else NPUTRACE) == [child]
        listed = {p["host_pid"]: p for p in daemon.processes()}
        assert listed[claimer]["uid"] == OTHER_UID and victim.pid not in listed[claimer]["ancestors"]
        assert listed[claimer]["pid"] == claimer, "the kernel's pid is shown, not the claim"
        if not kineto:  # pushed at once to the plugin (Kineto's child would have to poll for it)
            assert f"heard mm.command pid={child}" in heard(victim)
            assert "heard" not in heard(claimant), "the claimant got the victim's command"
    finally:
        for workload in started:
            workload.stop()
        daemon.cleanup()


# An interpreter the other user may run inside a user namespace of its own (this one may live under
# /root); the registrants need the standard library and msmonitor_contract alone.
SYSTEM_PYTHON = "/usr/bin/python3"


@needs_root
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON} for another user")
def test_pids_a_user_picked_in_a_pid_namespace_of_its_own_select_nothing(netns_holder: int, tmp_path: Path):
    """Any user may create a user namespace, and in it a pid namespace whose pids it picks
    (``ns_last_pid``): another allowed uid gives its process the victim's pid there. The kernel's NSpid
    then says so, truly; ``--pids <victim>`` still selects the victim's alone, as the claimant's user
    namespace is not the daemon's."""
    daemon = Daemon(tmp_path / "d", ["--ipc-socket-dir=", "--ipc-allowed-uids", f"0,{OTHER_UID}"])
    daemon.netns_of = netns_holder
    started: List[Workload] = []
    try:
        daemon.start()
        victim = registrants(1, address="@dynolog", netns_of=netns_holder)
        started.append(victim.start())
        (target,) = verdicts(victim)["acked"]
        own_namespaces = [
            *AS_OTHER,
            *("unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"),
            *("env", f"PYTHONPATH={Path(wire.__file__).parents[1]}"),
            *("sh", "-c", 'echo "$0" > /proc/sys/kernel/ns_last_pid && exec "$@"', str(target - 1)),
        ]
        claimant = registrants(
            1, address="@dynolog", netns_of=netns_holder, launcher=own_namespaces, python=SYSTEM_PYTHON
        )
        started.append(claimant.start())
        (impostor,) = verdicts(claimant)["acked"]
        listed = {p["host_pid"]: p for p in daemon.processes()}
        assert listed[impostor]["pid"] == target, "the kernel's NSpid: the pid it picked in its namespace"
        assert selected(daemon, tmp_path, [target]) == [target]
    finally:
        for workload in started:
            workload.stop()
        daemon.cleanup()


@needs_pid_namespace
def test_inside_a_pid_namespace_the_ancestors_there_select_from_proc(daemon: Daemon, tmp_path: Path):
    """Containers keep working: a launcher's pid inside its pid namespace selects its worker, because
    the daemon reads the ancestors' pids there from ``/proc`` (NSpid), not from the worker's word (the
    worker here claims none). ``sh`` is the namespace's pid 1, the launcher pid 2, its child pid 3."""
    launcher = Workload(
        "registrants.py",
        {},
        [str(daemon.socket_dir / "dynolog"), "1"],
        launcher=["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", '"$0" "$@"; :'],
    )
    try:
        launcher.start()
        assert launcher.pid == 2, launcher.ready
        assert verdicts(launcher)["acked"] == [3]  # as the child sees itself
        (listed,) = daemon.processes()
        host_child = listed["host_pid"]
        assert listed["pid"] == 3 and host_child != 3 and 2 in listed["ancestors"], listed
        assert selected(daemon, tmp_path, [2]) == [host_child]  # host pid 2 is kthreadd: never an ancestor
    finally:
        launcher.stop()


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_registrations_past_the_cap_are_refused_by_name(start_daemon: Callable[..., Daemon]):
    """Item 7's bound: with ``--max-ipc-clients 20``, 30 processes register; 20 are acknowledged, the
    rest refused with one log line naming a refused pid, its uid, the cap and the flag, and gRPC
    answers throughout. One uid is allowed, so it may hold the whole cap (by default a test run
    not as root allows root too, and each uid may then hold half)."""
    daemon = start_daemon("--max-ipc-clients", "20", "--ipc-allowed-uids", str(os.getuid()))
    # A refused child gives up after 2 s: the ready line comes when every child answered or gave up.
    swarm = registrants(30, "--ack-s", "2", address=str(daemon.socket_dir / "dynolog"))
    try:
        swarm.start()
        answers = verdicts(swarm)
        assert (len(answers["acked"]), len(answers["refused"])) == (20, 10)
        status = daemon.dyno_json("status")
        assert status["processes"] == 20, status
        lines = [line for line in daemon.log_file.read_text().splitlines() if "refused to register" in line]
        assert len(lines) == 1, "one line a minute per uid"
        refused = int(lines[0].split("refused to register process ")[1].split()[0])
        assert refused in answers["refused"]
        assert f"(uid {os.getuid()})" in lines[0] and "--max-ipc-clients allows (20)" in lines[0]
    finally:
        swarm.stop()


@needs_root
def test_one_uids_swarm_is_held_to_its_share_and_another_uids_process_still_registers(
    netns_holder: int, tmp_path: Path
):
    """With two uids allowed, one uid's fork storm no longer fills ``--max-ipc-clients``: each uid holds
    at most half of it. Under a cap of 20, 25 processes of uid 65534 register: 10 are acknowledged, the
    rest refused, logged naming that uid's share; root's new processes are then still acknowledged
    (with the cap alone, 65534 took all 20 slots and root's were refused)."""
    flags = ["--ipc-socket-dir=", "--ipc-allowed-uids", f"0,{OTHER_UID}", "--max-ipc-clients", "20"]
    daemon = Daemon(tmp_path / "d", flags)
    daemon.netns_of = netns_holder
    started: List[Workload] = []
    try:
        daemon.start()
        swarm = registrants(25, "--ack-s", "2", address="@dynolog", netns_of=netns_holder, launcher=AS_OTHER)
        started.append(swarm.start())
        stormed = verdicts(swarm)
        assert (len(stormed["acked"]), len(stormed["refused"])) == (10, 15)
        job = registrants(3, address="@dynolog", netns_of=netns_holder)
        started.append(job.start())
        assert len(verdicts(job)["acked"]) == 3
        assert daemon.dyno_json("status")["processes"] == 13
        lines = [line for line in daemon.log_file.read_text().splitlines() if "refused to register" in line]
        assert len(lines) == 1, lines  # uid 65534's; root's were all admitted
        refused = int(lines[0].split("refused to register process ")[1].split()[0])
        assert refused in stormed["refused"]
        assert f"(uid {OTHER_UID}): uid {OTHER_UID} has 10 processes registered" in lines[0], lines[0]
        assert "its share of --max-ipc-clients (20) with 2 uids allowed (half: 10)" in lines[0], lines[0]
    finally:
        for workload in started:
            workload.stop()
        daemon.cleanup()


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="prlimit(1) lowers the daemon's open files limit")
def test_many_registrations_under_a_low_descriptor_limit_leave_the_port_reachable(tmp_path: Path):
    """Item 7's attack: more registering processes than the daemon's open files limit. Each used to hold
    a pidfd until no descriptor was left to accept a gRPC connection (``dyno status``: "cannot reach
    dynolog"); now the pidfds stop short of the reserve kept for the port, the rest are watched by the
    sweep, every process is registered and ``dyno status`` answers."""
    limit, count = 700, 800
    daemon = Daemon(tmp_path / "d", open_files=limit)  # soft and hard alike: it cannot raise it
    swarm = registrants(count, address=str(daemon.socket_dir / "dynolog"))
    try:
        daemon.start()
        assert daemon.proc is not None
        swarm.start()
        assert len(verdicts(swarm)["acked"]) == count
        assert daemon.dyno_json("status")["processes"] == count
        # The pidfds hold half of what is past the reserve at most: the reserve, and more, stays free.
        assert limit - fd_count(daemon.proc.pid) >= RESERVED - 64
        assert "watched by the sweep, not a pidfd" in daemon.log_file.read_text()
    finally:
        swarm.stop()
        daemon.cleanup()
