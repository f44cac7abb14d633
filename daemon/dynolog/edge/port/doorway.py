"""Where connections wait until their first bytes say what they speak, at little cost each.

A connection that sends nothing must cost the daemon almost nothing, or a flood of them (10 000 held
open from one address) slows every gRPC call relayed on the same event loop. So until it is told apart
a connection is a socket, a reader callback and a buffer: no task, no stream, no timer of its own. One
sweep every half second closes those past their deadline, and an address may keep at most
:data:`MAX_WAITING_PER_ADDRESS` waiting at once: a new connection from an address at its cap closes
that address's longest-silent one. An honest client speaks at once, so it is never the one closed,
even while another user of its address (every local user is 127.0.0.1) floods the port.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, Optional, OrderedDict

from .sniff import Sniffed, sniff

log = logging.getLogger("dynolog.edge.port")

MAX_WAITING_PER_ADDRESS = 256  # an honest client sends its first bytes at once: few ever wait
ACCEPTS_PER_TURN = 64  # then the event loop runs what else is ready
_SWEEP_EVERY_S = 0.5
_READ = 1 << 16


@dataclass(eq=False)
class Arrival:
    sock: socket.socket
    host: str
    deadline: float
    data: bytearray = field(default_factory=bytearray)
    waiting: bool = True


Decided = Callable[[socket.socket, str, bytes, Sniffed], None]


class Doorway:
    def __init__(self, listening: socket.socket, decided: Decided, timeout_s: float) -> None:
        self._listening = listening
        self._decided = decided
        self._timeout_s = timeout_s
        self._loop = asyncio.get_running_loop()
        self._by_host: Dict[str, OrderedDict[int, Arrival]] = {}  # waiting, oldest first
        self._queue: Deque[Arrival] = collections.deque()  # in accept order, so in deadline order
        self._waiting: Dict[int, Arrival] = {}
        self._sweeper: Optional[asyncio.TimerHandle] = None
        self._resume: Optional[asyncio.TimerHandle] = None  # accepting again after a shortage
        self._short_of_descriptors_logged = 0.0
        self.evicted = 0  # closed for a newer connection from their address

    def open(self) -> None:
        self._listening.setblocking(False)
        self._loop.add_reader(self._listening.fileno(), self._accept)
        self._sweeper = self._loop.call_later(_SWEEP_EVERY_S, self._sweep)

    def close(self) -> None:
        self._loop.remove_reader(self._listening.fileno())
        self._listening.close()
        for timer in (self._sweeper, self._resume):
            if timer is not None:
                timer.cancel()
        for arrival in list(self._waiting.values()):
            self._drop(arrival)

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            try:
                sock, address = self._listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._short_of_descriptors(exc)
                return
            host = str(address[0])
            waiting = self._by_host.get(host)
            if waiting is not None and len(waiting) >= MAX_WAITING_PER_ADDRESS:
                self._drop(next(iter(waiting.values())))
                self.evicted += 1
            same_host = self._by_host.setdefault(host, collections.OrderedDict())
            sock.setblocking(False)
            arrival = Arrival(sock, host, time.monotonic() + self._timeout_s)
            self._waiting[sock.fileno()] = arrival
            same_host[sock.fileno()] = arrival
            self._queue.append(arrival)
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
        arrival.data += piece
        try:
            sniffed = sniff(bytes(arrival.data))
        except ValueError as exc:
            log.debug("connection from %s closed: %s", arrival.host, exc)
            return self._drop(arrival)
        if sniffed is not None:
            self._release(arrival)
            self._decided(arrival.sock, arrival.host, bytes(arrival.data), sniffed)
        return None

    def _sweep(self) -> None:
        now = time.monotonic()
        queue = self._queue
        while queue and (not queue[0].waiting or queue[0].deadline <= now):  # decided ones leave here too
            arrival = queue.popleft()
            if arrival.waiting:
                self._drop(arrival)
        self._sweeper = self._loop.call_later(_SWEEP_EVERY_S, self._sweep)

    def _release(self, arrival: Arrival) -> None:
        arrival.waiting = False
        self._loop.remove_reader(arrival.sock.fileno())
        fd = arrival.sock.fileno()
        del self._waiting[fd]
        same_host = self._by_host[arrival.host]
        del same_host[fd]
        if not same_host:
            del self._by_host[arrival.host]

    def _drop(self, arrival: Arrival) -> None:
        self._release(arrival)
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
