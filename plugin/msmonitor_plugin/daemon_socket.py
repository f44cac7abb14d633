"""The plugin's one kind of socket: an AF_UNIX datagram socket to a daemon, speaking the wire's framing.

The link to this project's daemon, msMonitor's control socket (the frameworks' proxy) and msMonitor's
data socket each use one. It never blocks: a send the daemon cannot take at once fails, and the caller
decides what that means (retry, count, or nothing).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import time
from types import TracebackType
from typing import Optional, Type

from msmonitor_contract import wire


class DaemonSocket:
    """A non-blocking datagram socket that sends to *daemon*. Bound to *address* when one is given, to
    hear the daemon's answers: then only the daemon's datagrams are read (its credentials checked)."""

    def __init__(self, daemon: wire.Address, address: Optional[wire.Address] = None) -> None:
        self.daemon = daemon
        self.address = address
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        if address is not None:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # to check who answers
            self._sock.bind(address)

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, msg_type: str, payload: bytes = b"") -> None:
        """One datagram to the daemon; OSError when it does not take it (absent, queue full, ...)."""
        self._sock.sendto(wire.encode(msg_type, payload), self.daemon)

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
        return wire.receive_from(self._sock, self.daemon)

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
