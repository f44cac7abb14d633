"""The daemon's local IPC: bound datagram sockets served from the asyncio event loop.

Each readable event drains the socket without sleeping; every datagram is read whole into a fixed
buffer (a truncated one is malformed), so nothing a peer sends can stall the loop. The kernel-verified
sender (``SO_PASSCRED``) comes with every datagram. Replies leave through the socket the request came
in on — stock Kineto aborts on a reply from any other address.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import stat
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from msmonitor_plugin import wire

log = logging.getLogger("dynolog.ipc")

# Datagrams handled per readable event before yielding to gRPC; the reader fires again at once if
# more are queued, so this bounds latency for other work (a status call during a flood), not throughput.
_BATCH = 32


@dataclass(frozen=True)
class Sender:
    address: wire.Address
    pid: int  # kernel-verified, in the daemon's pid namespace
    uid: int


@dataclass
class IpcCounters:
    """Every datagram read ends in exactly one of handled, malformed or rejected_senders, so
    ``received == handled + malformed + rejected_senders`` at any moment the loop is not mid-datagram."""

    received: int = 0
    handled: int = 0  # parsed and acted on
    replied: int = 0
    malformed: int = 0
    rejected_senders: int = 0
    send_errors: int = 0


class IpcError(RuntimeError):
    """The IPC cannot be served; the message is for the operator."""


class IpcAddressInUse(IpcError):
    pass


# Called with the endpoint the datagram came in on, so the reply can leave through it.
Handler = Callable[["IpcEndpoint", bytes, Sender], None]


# What an endpoint is for: dynolog's own address, or one of msMonitor's two sockets.
DYNOLOG = "dynolog"
MSMONITOR = "msmonitor"
MSMONITOR_DATA = "msmonitor-data"


class IpcEndpoint:
    def __init__(
        self, address: wire.Address, handler: Handler, counters: IpcCounters, flavour: str = DYNOLOG
    ) -> None:
        self.address = address
        self.flavour = flavour
        self._handler = handler
        self._counters = counters
        self._sock: Optional[socket.socket] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        sock.setblocking(False)
        if isinstance(self.address, str):
            _remove_stale_socket(self.address)
        try:
            old_umask = os.umask(0o177)  # owner-only from the moment the path exists
            try:
                sock.bind(self.address)
            finally:
                os.umask(old_umask)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise IpcAddressInUse(
                    f"another daemon is already bound to IPC address {wire.describe_address(self.address)}; "
                    "stop it, or give this one another --ipc-socket-dir"
                ) from None
            raise IpcError(f"cannot bind IPC socket {self.describe()}: {exc.strerror}") from None
        self._sock, self._loop = sock, loop
        loop.add_reader(sock.fileno(), self._drain)

    def describe(self) -> str:
        return wire.describe_address(self.address)

    def send(self, data: bytes, address: wire.Address) -> bool:
        """Non-blocking, one try: a peer that is gone or not reading loses its reply, never our time."""
        assert self._sock is not None
        try:
            self._sock.sendto(data, address)
        except OSError as exc:
            self._counters.send_errors += 1
            log.debug("reply to %s failed: %s", wire.describe_address(address), exc)
            return False
        self._counters.replied += 1
        return True

    def close(self) -> None:
        if self._sock is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None
        if isinstance(self.address, str):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)

    def _drain(self) -> None:
        assert self._sock is not None
        for _ in range(_BATCH):
            try:
                data, ancdata, flags, address = self._sock.recvmsg(wire.MAX_DATAGRAM, wire.CREDENTIALS_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # never let a socket error escape into the loop
                log.warning("IPC receive failed: %s", exc)
                return
            self._counters.received += 1
            sender = _sender(address, ancdata)
            if flags & socket.MSG_TRUNC or sender is None:
                self._counters.malformed += 1
                continue
            try:
                self._handler(self, data, sender)
            except Exception:
                self._counters.malformed += 1
                log.exception("IPC handler failed on a datagram from pid %d", sender.pid)


def _sender(address: wire.Address, ancdata: List[Tuple[int, int, bytes]]) -> Optional[Sender]:
    creds = wire.credentials(ancdata)
    return Sender(address, *creds) if creds is not None else None


def _remove_stale_socket(path: str) -> None:
    """Remove a socket file left by a dead daemon; refuse when one still answers there."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise IpcAddressInUse(
            f"{path} exists and is not a socket; remove it or choose another --ipc-socket-dir"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # nobody bound: stale
        return
    finally:
        probe.close()
    raise IpcAddressInUse(
        f"another daemon is already serving IPC at {path}; stop it, or give this one another --ipc-socket-dir"
    )
