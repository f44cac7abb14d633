"""The plugin's one kind of socket: an AF_UNIX datagram socket to a daemon, speaking the wire's framing.

The link to this project's daemon, msMonitor's control socket (the frameworks' proxy) and msMonitor's
data socket each use one. It never blocks: a send the daemon cannot take at once fails, and the caller
decides what that means (retry, count, or nothing).

Any local user can bind the daemon's abstract name (``@dynolog@``) before the daemon does, and would then
read every hello (pid, ancestors, job, rank, host). A socket given the daemon's *uids* (the link's) checks,
before each datagram, who holds the daemon's address, and sends nothing to a holder of another uid: it
raises :class:`Squatted`, which the link treats as an absent daemon (it retries, backing off). How:
``msmonitor_contract.holders`` asks the kernel (``sock_diag``) which socket a send would reach and which
uid created it; ``SO_PEERCRED`` says nothing for datagram sockets, and the daemon proving itself in a
reply (``SCM_CREDENTIALS``, which :meth:`read` checks as well) would come only after the first hello was
sent. The check costs a probe socket and two netlink round trips (tens of microseconds, on the link's
thread), leaving a window of microseconds between check and send in which the daemon would have to exit
and another user bind its name. Where the kernel cannot say (before Linux 5.3, netlink filtered), a
pathname socket's file owner stands in, and an abstract name is used as before (:attr:`unverified`).

The daemon's uids: this user's and root's, or those ``MSMONITOR_DAEMON_UIDS`` lists (``0,1000``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import time
from types import TracebackType
from typing import FrozenSet, Mapping, Optional, Type

from msmonitor_contract import holders, wire
from msmonitor_contract.numbers import strict_int

UIDS_VARIABLE = "MSMONITOR_DAEMON_UIDS"


def daemon_uids(env: Mapping[str, str] = os.environ) -> FrozenSet[int]:
    """The uids the daemon may run as: ``MSMONITOR_DAEMON_UIDS`` (comma-separated; what is not a uid is
    ignored), else this user's and root's."""
    listed = (strict_int(part.strip()) for part in env.get(UIDS_VARIABLE, "").split(","))
    return frozenset(uid for uid in listed if uid is not None) or frozenset((os.getuid(), 0))


class Squatted(OSError):
    """The daemon's address is held by a process of a uid the daemon does not run as: nothing was sent."""

    def __init__(self, holder: holders.Holder) -> None:
        super().__init__(errno.EPERM, f"the daemon's address is held by {holder.describe()}")
        self.holder = holder


class DaemonSocket:
    """A non-blocking datagram socket that sends to *daemon*. Bound to *address* when one is given, to
    hear the daemon's answers: then only the daemon's datagrams are read (its credentials checked)."""

    def __init__(
        self,
        daemon: wire.Address,
        address: Optional[wire.Address] = None,
        uids: Optional[FrozenSet[int]] = None,
    ) -> None:
        self.daemon = daemon
        self.address = address
        self.uids = uids  # when given: nothing is sent to a holder of another uid, nothing read from one
        self.unverified = False  # the latest check could not tell who holds the daemon's address
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        if address is not None:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # to check who answers
            self._sock.bind(address)

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, msg_type: str, payload: bytes = b"") -> None:
        """One datagram to the daemon; OSError when it does not take it (absent, queue full, ...), and
        :class:`Squatted` when another user's process holds its address."""
        if self.uids is not None:
            self._check_holder()
        self._sock.sendto(wire.encode(msg_type, payload), self.daemon)

    def _check_holder(self) -> None:
        assert self.uids is not None
        holder = holders.holder(self.daemon)  # OSError when nobody holds it: as absent as a failed send
        self.unverified = holder.uid is None
        if holder.uid is not None and holder.uid not in self.uids:
            raise Squatted(holder)

    def offer(self, msg_type: str, payload: bytes = b"") -> bool:
        """:meth:`send`, for a message the daemon may miss: False when it did not take it."""
        try:
            self.send(msg_type, payload)
        except OSError:
            return False
        return True

    def read(self) -> Optional[bytes]:
        """The next queued datagram if the daemon sent it, None if someone else did (it is dropped);
        BlockingIOError when none is queued."""
        return wire.receive_from(self._sock, self.daemon, self.uids)

    def receive(self, msg_type: str, timeout: float) -> Optional[bytes]:
        """The payload of the daemon's next datagram of *msg_type* within *timeout*; others (late
        replies, acks, malformed ones) are dropped."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._sock], [], [], remaining)[0]:
                return None
            with contextlib.suppress(BlockingIOError, wire.WireError):
                data = self.read()
                datagram = wire.decode(data) if data is not None else None
                if datagram is not None and datagram.type == msg_type:
                    return datagram.payload

    def close(self) -> None:
        """Close the socket and remove its file, if it was bound to one."""
        self._sock.close()
        if isinstance(self.address, str):
            with contextlib.suppress(OSError):
                os.unlink(self.address)

    def __enter__(self) -> DaemonSocket:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()
