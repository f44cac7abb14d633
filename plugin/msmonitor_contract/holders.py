"""Who holds a datagram socket address: the uid the kernel attests, and the pid where /proc tells.

Any local user can bind an abstract name first (``@dynolog@``): a plugin must know who holds the
daemon's address before it says who it is, and a daemon that finds its address taken names the holder.

What Linux offers for an AF_UNIX datagram socket, and why this reads the ``sock_diag`` answer:

- ``SO_PEERCRED`` is filled in by a stream connect or ``socketpair`` only: on a connected datagram socket
  it reads pid 0, uid -1.
- ``SCM_CREDENTIALS`` attests the sender of a datagram, so it proves who answered, never who will read
  what is sent first.
- The socket file's owner (``os.stat``) names who bound a pathname socket (only root can chown), but an
  abstract name has no file.
- ``/proc/net/unix`` gives the inode bound to a name, and ``/proc/*/fd`` the process holding that inode,
  but another user's ``fd`` folder is unreadable to all but root: no uid for an unprivileged plugin.
- ``NETLINK_SOCK_DIAG`` answers any local user, without a scan: a probe socket connected to the address
  (the kernel resolves the name to the very socket a send would reach), then one query for the probe's
  peer inode (``UDIAG_SHOW_PEER``) and one for that socket's owner (``UDIAG_SHOW_UID``, Linux 5.3 and on:
  the uid that created the socket, which its holder cannot change). Two round trips to the kernel, tens
  of microseconds.

Where the kernel does not answer (older than 5.3, netlink filtered out, another network namespace
sharing a pathname socket), a pathname socket's file owner stands in; for an abstract name the uid is
unknown (None) and the caller decides.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from dataclasses import dataclass
from typing import List, Optional, Union

from .numbers import strict_int

Address = Union[str, bytes]

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLH = struct.Struct("=IHHII")  # struct nlmsghdr
_REQUEST = struct.Struct("=BBHIIIII")  # unix_diag_req: family, protocol, pad, states, ino, show, cookie
_ANSWER = struct.Struct("=BBBBIII")  # struct unix_diag_msg
_ATTR = struct.Struct("=HH")  # struct rtattr
_UDIAG_SHOW_PEER, _UNIX_DIAG_PEER = 0x04, 2
_UDIAG_SHOW_UID, _UNIX_DIAG_UID = 0x40, 7
_U32 = struct.Struct("=I")


@dataclass(frozen=True)
class Holder:
    """Whoever holds an address: uid None where the kernel did not say, pid None where /proc did not."""

    uid: Optional[int]
    inode: Optional[int] = None
    pid: Optional[int] = None

    def describe(self) -> str:
        if self.uid is None:
            return "another process"
        return f"uid {self.uid}" + (f", pid {self.pid}" if self.pid is not None else "")


def holder(address: Address) -> Holder:
    """Who holds *address* now; OSError (ECONNREFUSED, ENOENT, ...) when nobody does."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
        probe.connect(address)  # the socket a send to *address* reaches now
        inode = _attribute(os.fstat(probe.fileno()).st_ino, _UDIAG_SHOW_PEER, _UNIX_DIAG_PEER)
        uid = _attribute(inode, _UDIAG_SHOW_UID, _UNIX_DIAG_UID) if inode else None
        if uid is None and isinstance(address, str):
            with contextlib.suppress(OSError):
                uid = os.stat(address).st_uid
    return Holder(uid, inode or None)


def with_pid(found: Holder) -> Holder:
    """*found* with the pid of a process holding its socket, where /proc lets us read its fds. A scan of
    every process: for a message to a person, never for each send."""
    if not found.inode:
        return found
    target = f"socket:[{found.inode}]"
    for name in _listdir("/proc"):
        pid = strict_int(name)
        if pid is None:
            continue
        for fd in _listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return Holder(found.uid, found.inode, pid)
    return found


def _listdir(path: str) -> List[str]:
    try:
        return os.listdir(path)
    except OSError:  # gone, or another user's
        return []


def _attribute(inode: int, show: int, kind: int) -> Optional[int]:
    """The 32-bit attribute *kind* of unix socket *inode* from sock_diag; None when it does not say."""
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as diag:
            diag.settimeout(1.0)  # the kernel answers within the send; a bound, never a wait
            request = _REQUEST.pack(socket.AF_UNIX, 0, 0, 0xFFFFFFFF, inode, show, 0xFFFFFFFF, 0xFFFFFFFF)
            header = _NLH.pack(_NLH.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
            diag.sendto(header + request, (0, 0))
            answer = diag.recv(8192)
    except (OSError, AttributeError):  # no netlink here (filtered, or not Linux)
        return None
    return _parse(answer, kind)


def _parse(answer: bytes, kind: int) -> Optional[int]:
    if len(answer) < _NLH.size + _ANSWER.size:
        return None
    length, msg_type, _, _, _ = _NLH.unpack_from(answer)
    if msg_type != _SOCK_DIAG_BY_FAMILY:  # NLMSG_ERROR: no such socket in this network namespace
        return None
    offset, end = _NLH.size + _ANSWER.size, min(length, len(answer))
    while offset + _ATTR.size <= end:
        size, attr = _ATTR.unpack_from(answer, offset)
        if size < _ATTR.size:
            return None
        if attr == kind and size >= _ATTR.size + _U32.size and offset + size <= end:
            return int(_U32.unpack_from(answer, offset + _ATTR.size)[0])
        offset += (size + 3) & ~3
    return None
