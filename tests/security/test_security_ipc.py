"""The local side: IPC sockets only their owner can reach, and datagrams from other uids counted and
dropped on the kernel's word (SO_PASSCRED), never answered."""

from __future__ import annotations

import os
import select
import socket
from pathlib import Path
from typing import Callable

import pytest

from harness import Daemon, wait_until
from msmonitor_contract import wire

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")


def socket_path(d: Daemon) -> str:
    path = wire.endpoint_address(wire.DAEMON_ENDPOINT, str(d.socket_dir))
    assert isinstance(path, str)
    return path


def kineto_poll() -> bytes:
    return wire.encode(wire.REQ, wire.KinetoRequest(config_type=0, job_id=0, pids=(os.getpid(),)).pack())


def _read(fd: int) -> str:
    ready, _, _ = select.select([fd], [], [], 30)
    assert ready, "the child did not answer within 30 s"
    return os.read(fd, 100).decode()


def _child(uid: int, target: str, datagram: bytes, report: int, go: int) -> None:
    """In the forked child: become *uid*, send one datagram, then say whether a reply came."""
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(f"\0mm-uid-test-{os.getpid()}")  # abstract: needs no writable directory
            try:
                sock.sendto(datagram, target)
            except PermissionError:
                os.write(report, b"EACCES")
                return
            os.write(report, b"sent")
            os.read(go, 1)  # the parent has seen the daemon handle it
            sock.setblocking(False)
            try:
                sock.recv(4096)
                os.write(report, b"reply")
            except BlockingIOError:
                os.write(report, b"none")
    finally:
        os._exit(0)


def send_as(uid: int, d: Daemon, after_sent: Callable[[], object]) -> list[str]:
    """Fork a child that sends a Kineto poll to *d* as *uid*; what it saw, in order."""
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(report_r)
        os.close(go_w)
        _child(uid, socket_path(d), kineto_poll(), report_w, go_r)
    os.close(report_w)
    os.close(go_r)
    try:
        seen = [_read(report_r)]
        if seen == ["sent"]:
            after_sent()
            os.write(go_w, b"x")
            seen.append(_read(report_r))
        return seen
    finally:
        os.close(go_w)  # a child still waiting for "go" reads EOF and exits
        os.close(report_r)
        os.waitpid(pid, 0)


def ipc_counters(d: Daemon) -> dict[str, int]:
    return {k: int(v) for k, v in d.dyno_json("status")["ipc"].items()}  # JSON writes uint64 as text


def test_socket_is_owner_only(daemon: Daemon) -> None:
    assert os.stat(socket_path(daemon)).st_mode & 0o777 == 0o600
    os.chmod(daemon.socket_dir, 0o711)  # even with the directory open, the socket itself is closed to others
    assert send_as(NOBODY, daemon, lambda: None) == ["EACCES"]
    assert ipc_counters(daemon)["received"] == 0


def test_datagram_from_another_uid_is_counted_and_not_answered(daemon: Daemon) -> None:
    # Open the way in, so only the daemon's uid check stands between the sender and an answer.
    os.chmod(daemon.socket_dir, 0o711)
    os.chmod(socket_path(daemon), 0o666)
    counters = lambda: ipc_counters(daemon)  # noqa: E731
    seen = send_as(
        NOBODY, daemon, lambda: wait_until(lambda: counters()["rejected_senders"] == 1, what="rejection")
    )
    assert seen == ["sent", "none"]
    assert counters()["replied"] == 0
    assert daemon.processes() == []
    # The same datagram from an allowed uid (root, the daemon's own) is answered: the check is the uid.
    seen = send_as(0, daemon, lambda: wait_until(lambda: counters()["replied"] == 1, what="reply"))
    assert seen == ["sent", "reply"]


def test_allowed_uids_flag(start_daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    d = start_daemon("--ipc-allowed-uids", "12345")  # not root: the test process is now a stranger
    os.chmod(d.socket_dir, 0o711)
    seen = send_as(
        0, d, lambda: wait_until(lambda: ipc_counters(d)["rejected_senders"] == 1, what="rejection")
    )
    assert seen == ["sent", "none"]
