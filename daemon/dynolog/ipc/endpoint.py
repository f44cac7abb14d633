"""The daemon's local IPC: bound datagram sockets, read by a thread of their own and handled on the
asyncio event loop.

A thread per socket reads each datagram as it arrives, whatever the loop is busy with (a large gRPC
request, say): the kernel queues only a few datagrams per socket, and a plugin whose heartbeat finds the
queue full loses it, so a loop that stalled would make the daemon forget live processes. What the thread
read waits in a bounded backlog for the loop, which handles it in batches, and all of it before it
decides that a process went silent (:meth:`IpcEndpoint.handle_backlog`). Every datagram is read whole
into a fixed buffer (a truncated one is malformed), with the kernel-verified sender (``SO_PASSCRED``).
Replies leave through the socket the request came in on — stock Kineto aborts on a reply from any other
address.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import logging
import os
import select
import socket
import stat
import threading
from dataclasses import dataclass
from typing import Any, Callable, Deque, List, Optional, Tuple, Union

from msmonitor_contract import holders, wire

log = logging.getLogger("dynolog.ipc.endpoint")

# Datagrams handled per turn of the loop before yielding to gRPC; the next turn handles more at once,
# so this bounds latency for other work (a status call during a flood), not throughput.
_BATCH = 32
# Datagrams read and not yet handled, at most: beyond it the reader leaves them to the kernel's queue
# until the loop catches up. A thousand processes' heartbeats of 10 s; at most 1 GiB of the largest.
MAX_BACKLOG = 16_384
Received = Tuple[bytes, List[Tuple[int, int, bytes]], int, Any]  # recvmsg's data, ancdata, flags, address
# Run on the loop once every datagram queued before it was asked for is handled (:meth:`after_queued`).
Marker = Callable[[], None]
_CLOSE, _FLUSH = b"x", b"f"  # what the wake pipe tells the reader


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
        self._backlog: Deque[Union[Received, Marker]] = collections.deque()
        self._markers: List[Marker] = []  # asked for, placed in the backlog by the reader (under _lock)
        self._flush_asked = False  # a flush byte is in the wake pipe (under _lock): one at most
        self._room = threading.Event()  # set while the backlog has room for more
        self._lock = threading.Lock()  # for _scheduled, shared by the reader and the loop
        self._scheduled = False  # whether the loop has a turn of handle_backlog coming
        self._wake: Tuple[int, int] = (-1, -1)  # a pipe that tells the reader to end, or to flush
        self._reader: Optional[threading.Thread] = None

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
                    f"another daemon is already bound to IPC address {wire.describe_address(self.address)} "
                    f"(held by {_holder(self.address)}); stop it, or give this one another --ipc-socket-dir"
                ) from None
            raise IpcError(f"cannot bind IPC socket {self.describe()}: {exc.strerror}") from None
        self._sock, self._loop, self._wake = sock, loop, os.pipe()
        self._room.set()
        self._reader = threading.Thread(target=self._read, name="dynolog-ipc-reader", daemon=True)
        self._reader.start()

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

    def after_queued(self, marker: Marker) -> None:
        """Run *marker* on the loop after every datagram the socket holds now: a process that has exited
        sends nothing more, so what it sent is all handled before the marker forgets it."""
        if self._sock is None:
            return
        with self._lock:
            self._markers.append(marker)
            asked, self._flush_asked = self._flush_asked, True
        if not asked:
            os.write(self._wake[1], _FLUSH)

    def close(self) -> None:
        if self._sock is None:
            return
        os.write(self._wake[1], _CLOSE)
        self._room.set()
        if self._reader is not None:
            self._reader.join()
        for fd in self._wake:
            os.close(fd)
        self._backlog.clear()  # a turn of the loop still coming finds nothing to handle
        self._sock.close()
        self._sock = None
        if isinstance(self.address, str):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)

    # --- the reader thread ----------------------------------------------------------------------

    def _read(self) -> None:
        """Read each datagram as it arrives into the backlog, until :meth:`close`."""
        assert self._sock is not None
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        poller.register(self._wake[0], select.POLLIN)
        while True:
            self._room.wait()
            woken = any(fd == self._wake[0] for fd, _ in poller.poll())
            if woken and _CLOSE in os.read(self._wake[0], 512):
                return
            self._receive()

    def _receive(self) -> None:
        """What the socket holds now, while the backlog has room; then the loop is told."""
        assert self._sock is not None
        with self._lock:  # taken before reading: what was queued when they were asked is read first
            markers, self._markers, self._flush_asked = self._markers, [], False
        while len(self._backlog) < MAX_BACKLOG:
            try:
                self._backlog.append(self._sock.recvmsg(wire.MAX_DATAGRAM, wire.CREDENTIALS_SPACE))
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # never let a socket error end the reader
                log.warning("IPC receive failed: %s", exc)
                break
        else:
            self._room.clear()  # the loop sets it again once it handled some
        with self._lock:
            self._backlog.extend(markers)  # behind what was read: all that was queued when asked
            if self._scheduled or not self._backlog:
                return
            self._scheduled = True
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop closed: the daemon is stopping
            self._loop.call_soon_threadsafe(self._handle_batch)

    # --- the event loop ---------------------------------------------------------------------------

    def _handle_batch(self) -> None:
        """One batch of the backlog; another turn for the rest, so gRPC is served in between."""
        self._handle(_BATCH)
        with self._lock:
            self._scheduled = bool(self._backlog)
        if self._scheduled:
            assert self._loop is not None
            self._loop.call_soon(self._handle_batch)

    def handle_backlog(self) -> None:
        """Every datagram read so far: before deciding a process went silent, hear what it said."""
        self._handle(len(self._backlog))

    def _handle(self, most: int) -> None:
        for _ in range(most):
            try:
                item = self._backlog.popleft()
            except IndexError:
                break
            self._room.set()
            if callable(item):
                item()
            else:
                self._dispatch(*item)

    def _dispatch(self, data: bytes, ancdata: List[Tuple[int, int, bytes]], flags: int, address: Any) -> None:
        self._counters.received += 1
        sender = _sender(address, ancdata)
        if flags & socket.MSG_TRUNC or sender is None:
            self._counters.malformed += 1
            return
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
        f"another daemon is already serving IPC at {path} (held by {_holder(path)}); "
        "stop it, or give this one another --ipc-socket-dir"
    )


def _holder(address: wire.Address) -> str:
    """Who holds *address*, for the operator: any local user can bind an abstract name first."""
    try:
        return holders.with_pid(holders.holder(address)).describe()
    except OSError:  # gone since: whoever it was
        return "another process"
