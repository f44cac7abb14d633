"""Where connections wait until their first bytes say what they speak, at little cost each.

A connection that sends nothing must cost the daemon almost nothing, or a flood of them (10 000 held
open from one address) slows every gRPC call relayed on the same event loop. So until it is told apart
a connection is a socket, a reader callback and a :class:`~.sniff.Sniffer`: no task, no stream, no
timer of its own. The census (:mod:`.census`) bounds how many wait, per source and in all, and closes
those past their deadline; an honest client speaks at once, so it is never the one closed, even while
another user of its address (every local user is 127.0.0.1) floods the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import struct
import time
from typing import Callable, Dict, Optional

from .census import Census, Entry, Stage
from .sniff import Sniffed, Sniffer
from .sources import Sources

log = logging.getLogger("dynolog.edge.port")

_READ = 1 << 16


class Arrival:
    """An accepted connection, until it is told apart; then the one its server takes over."""

    def __init__(self, sock: socket.socket, host: str, source: str) -> None:
        self.sock = sock
        self.host = host
        self.source = source  # the sender, as the port's bounds count it (:mod:`.sources`)
        self.sniffer = Sniffer()
        self.entry: Optional[Entry] = None  # its place in the census
        self.taken = False  # its server took the socket over (and closes it)

    @property
    def data(self) -> bytes:
        return bytes(self.sniffer.data)


Decided = Callable[[Arrival, Sniffed], None]
Admitted = Callable[[Arrival], bool]


class Doorway:
    def __init__(
        self, listening: socket.socket, census: Census, admitted: Admitted, decided: Decided
    ) -> None:
        """*admitted* says at once whether a new connection may wait (False: it is closed unread);
        *decided* takes each that said what it speaks."""
        self._listening = listening
        self._census = census
        self._admitted = admitted
        self._sources = Sources()
        self._decided = decided
        self._loop = asyncio.get_running_loop()
        self._waiting: Dict[int, Arrival] = {}
        self._resume: Optional[asyncio.TimerHandle] = None  # accepting again after a shortage
        self._short_of_descriptors_logged = 0.0

    def open(self) -> None:
        self._listening.setblocking(False)
        self._loop.add_reader(self._listening.fileno(), self._accept)

    def close(self) -> None:
        self._loop.remove_reader(self._listening.fileno())
        self._listening.close()
        if self._resume is not None:
            self._resume.cancel()
        for arrival in list(self._waiting.values()):
            self._drop(arrival)
        self._sources.close()

    def _accept(self) -> None:
        """One connection a turn of the event loop (it calls back while more wait): under a flood of
        new connections, the bytes the port relays for its clients never wait behind a batch of them."""
        try:
            sock, address = self._listening.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._short_of_descriptors(exc)
            return
        source = self._sources.of(sock, address)
        arrival = Arrival(sock, str(address[0]), source or "")
        if source is None or not self._admitted(arrival):
            _reset(sock)
            return
        close = functools.partial(self._drop, arrival)
        arrival.entry = self._census.admit(Stage.WAITING, arrival.source, close)
        if arrival.entry is None:
            sock.close()
            return
        sock.setblocking(False)
        self._waiting[sock.fileno()] = arrival
        self._loop.add_reader(sock.fileno(), self._readable, arrival)

    def _readable(self, arrival: Arrival) -> None:
        try:
            piece = arrival.sock.recv(_READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            piece = b""
        if not piece:
            return self._drop(arrival)
        try:
            sniffed = arrival.sniffer.feed(piece)
        except ValueError as exc:
            log.debug("connection from %s closed: %s", arrival.host, exc)
            return self._drop(arrival)
        if sniffed is not None:
            self._release(arrival)
            self._decided(arrival, sniffed)
        return None

    def _release(self, arrival: Arrival) -> None:
        fd = arrival.sock.fileno()
        if self._waiting.pop(fd, None) is not None:
            self._loop.remove_reader(fd)

    def _drop(self, arrival: Arrival) -> None:
        self._release(arrival)
        if arrival.entry is not None:
            self._census.leave(arrival.entry)
        arrival.sock.close()

    def _short_of_descriptors(self, exc: OSError) -> None:
        """EMFILE and the like: connections stay in the backlog, accepted again a second later (a
        readable listening socket would otherwise call back at once, forever); said once a minute."""
        now = time.monotonic()
        if now - self._short_of_descriptors_logged > 60:
            self._short_of_descriptors_logged = now
            log.warning("cannot accept connections on the port for a second: %s", exc.strerror or exc)
        fd = self._listening.fileno()
        self._loop.remove_reader(fd)
        self._resume = self._loop.call_later(1.0, self._loop.add_reader, fd, self._accept)


_NO_LINGER = struct.pack("ii", 1, 0)


def _reset(sock: socket.socket) -> None:
    """Closed with a reset: no FIN exchange, no TIME_WAIT kept for a connection refused unread."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _NO_LINGER)
    sock.close()
