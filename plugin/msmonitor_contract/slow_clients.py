"""The slow-client (slowloris) defence that ``dyno respond``'s webhook and the daemon's Prometheus
exporter share: a thread per connection, and what a client that sends slowly can hold bounded.

- :class:`Connection`: a deadline for the whole request, however the bytes trickle in. Each read waits
  only for the time left (a timeout per read never fires on a byte every 9 s); a request not in by then
  is cut 408. Its answer gets a deadline of its own.
- :class:`HeadReader`: at most so many bytes of request line and headers (431).
- :class:`SlotServer`: so many connections at once. When all are taken, a new connection closes the
  oldest one still sending its request (cut 503) and takes its slot; when none is, it is answered a
  canned 503 without waiting and closed. A client that trickles bytes over every connection it can open
  then holds none for long, and a real request, sent in milliseconds, gets through.
- :class:`SparseLog`: a client can have requests cut by the thousand a second; a line per kind at most
  every so often, the others counted in it.
"""

from __future__ import annotations

import contextlib
import io
import math
import socket
import socketserver
import threading
import time
from typing import Any, Callable, Dict, Hashable, Optional

EVICT_WAIT_S = 1.0  # for the thread of a connection closed to make room to give back its slot


class Cut(Exception):
    """The request is not read any further: answered *code* (when it can be), the connection closed."""

    def __init__(self, code: int, why: str, headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(why)
        self.code, self.why, self.headers = code, why, headers


class Connection:
    """One accepted connection: its socket (the TLS one once wrapped), the deadline of what it is doing
    (its request, then its answer), and whether it may still be closed to make room (it is still sending
    its request, or in its handshake) or was. *note* follows the timeout in a 408's reason."""

    def __init__(
        self, sock: socket.socket, timeout: float, note: str = "", evicted_why: str = "every slot taken"
    ) -> None:
        self.sock, self.timeout, self.note, self.evicted_why = sock, timeout, note, evicted_why
        self.deadline = time.monotonic() + timeout
        self.answer_timeout = timeout
        self.reading = True
        self.evicted = False

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def answer_within(self, seconds: float) -> None:
        """The request is read: from now on the deadline is its answer's, *seconds* from now."""
        self.answer_timeout = seconds
        self.deadline = time.monotonic() + seconds

    def handshake(self) -> None:
        """The TLS handshake, within the deadline (do_handshake's timeout is for the whole of it)."""
        left = self._left()
        if self.evicted:
            raise ConnectionAbortedError("closed for a newer connection")
        if left <= 0:
            raise socket.timeout(f"not done within {self.timeout:g}s")
        self.sock.settimeout(left)
        self.sock.do_handshake()  # type: ignore[attr-defined]  # an ssl.SSLSocket

    def recv_into(self, view: memoryview) -> int:
        """Bytes of the request into *view*, waiting no longer than its deadline."""
        left = self._left()
        if left <= 0:
            raise self._late()
        self.sock.settimeout(left)  # the time left, not a fresh timeout per read
        try:
            count = self.sock.recv_into(view)
        except socket.timeout:
            raise self._late() from None
        if count == 0 and self.evicted:  # the read was ended by shutdown(SHUT_RD), not by the client
            raise Cut(503, f"closed for a newer connection: {self.evicted_why}", {"Retry-After": "1"})
        return count

    def send(self, view: memoryview) -> int:
        """Bytes of the answer, within its deadline; ConnectionAbortedError past it (which wsgiref takes
        as a client gone, no traceback)."""
        late = f"answer not read within {self.answer_timeout:g}s"
        left = self._left()
        if left <= 0:
            raise ConnectionAbortedError(late)
        self.sock.settimeout(left)
        try:
            return self.sock.send(view)
        except socket.timeout:
            raise ConnectionAbortedError(late) from None
        except OSError as exc:  # an SSL error or a reset: the client is gone all the same
            raise ConnectionAbortedError(str(exc)) from exc

    def _late(self) -> Cut:
        return Cut(408, f"request not in within {self.timeout:g}s{self.note}")


class HeadReader(io.RawIOBase):
    """The connection's bytes for http.server's buffered reads: within the deadline, and no more than
    *max_head* of them until the headers are read (then ``head_left`` is set to None by the handler)."""

    def __init__(self, connection: Connection, max_head: int) -> None:
        super().__init__()
        self.connection, self.max_head = connection, max_head
        self.head_left: Optional[int] = max_head

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self.head_left is not None:
            if self.head_left <= 0:  # a read asked for while the headers are still not complete
                raise Cut(431, f"request line and headers over {self.max_head // 1024} KiB")
            view = view[: self.head_left]
        count = self.connection.recv_into(view)
        if self.head_left is not None:
            self.head_left -= count
        return count


class SparseLog:
    """At most one line per kind every *every* seconds, the lines held back counted in the next one: a
    client can have requests cut by the thousand a second, and a line each would fill the log (and hold
    handler threads on a slow one)."""

    def __init__(self, log: Callable[[str], None], every: float) -> None:
        self.log, self.every = log, every
        self._lock = threading.Lock()
        self._next: Dict[Hashable, float] = {}
        self._held: Dict[Hashable, int] = {}

    def __call__(self, kind: Hashable, line: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now < self._next.get(kind, -math.inf):
                self._held[kind] = self._held.get(kind, 0) + 1
                return
            self._next[kind] = now + self.every
            held = self._held.pop(kind, 0)
        self.log(f"{line} (and {held} more since the last such line)" if held else line)

    def flush(self) -> None:
        """The counts still held back, when nothing more will come to carry them."""
        with self._lock:
            held, self._held = self._held, {}
        for kind, count in held.items():
            self.log(f"{count} more request(s) cut ({kind}) since the last such line")


def who(client_address: Any) -> str:
    return f"{client_address[0]}:{client_address[1]}"


class SlotServer(socketserver.ThreadingMixIn, socketserver.BaseServer):
    """A thread per connection, at most so many at once (put it first among the server's bases). Call
    :meth:`init_slots` before the server's ``__init__``; a subclass makes its connections
    (:meth:`new_connection`) and may set :attr:`busy_response`, the bytes written without waiting to a
    connection no slot or thread is found for (None: closed unanswered, as a TLS one must be), and
    :attr:`answer_timeout_s`, the deadline :meth:`answering` gives an answer (None: none set here)."""

    busy_response: Optional[bytes] = None
    answer_timeout_s: Optional[float] = None
    evict_wait_s = EVICT_WAIT_S

    def init_slots(self, count: int, cut_log: SparseLog) -> None:
        self.slot_count, self.cut_log = count, cut_log
        self._slots = threading.BoundedSemaphore(count)
        self._lock = threading.Lock()
        self._open: Dict[Any, Connection] = {}  # by accepted socket, in the order accepted: oldest first

    def new_connection(self, request: Any) -> Connection:
        raise NotImplementedError

    def cut(self, kind: Hashable, line: str) -> None:
        """A cut request's line, sparsely."""
        self.cut_log(kind, line)

    def process_request(self, request: Any, client_address: Any) -> None:
        connection = self.new_connection(request)
        if not self._slots.acquire(blocking=False) and not self.make_room():
            self.cut(
                "busy",
                f"{who(client_address)}: 503 (all {self.slot_count} connections taken, none freed in time)",
            )
            self._refuse(request)
            return
        with self._lock:
            self._open[request] = connection
        try:
            super().process_request(request, client_address)
        except Exception as exc:  # no thread for it (RuntimeError: can't start new thread): 503, not a leak
            self.give_back(request)
            self.cut("no thread", f"{who(client_address)}: 503 (no thread to serve it: {exc})")
            self._refuse(request)
        except BaseException:
            self.give_back(request)
            raise

    def _refuse(self, request: Any) -> None:
        if self.busy_response is not None:
            busy(request, self.busy_response)
        self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.give_back(request)

    def give_back(self, request: Any) -> None:
        """*request*'s slot, once: by its thread as it ends, or by the accept loop where no thread started."""
        with self._lock:
            held = self._open.pop(request, None) is not None
        if held:
            self._slots.release()

    def connection(self, request: Any) -> Connection:
        with self._lock:
            return self._open[request]

    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    def answering(self, connection: Connection) -> None:
        """*connection*'s request is read: no longer one to close to make room; its answer's deadline."""
        with self._lock:
            connection.reading = False
            if self.answer_timeout_s is not None:
                connection.answer_within(self.answer_timeout_s)

    def make_room(self) -> bool:
        """Close the oldest connection still sending its request and take its slot; False when none
        is, or its thread did not give the slot back within :attr:`evict_wait_s`."""
        with self._lock:
            oldest = next((c for c in self._open.values() if c.reading), None)
            if oldest is None:
                return False
            oldest.reading, oldest.evicted = False, True
            sock = oldest.sock
        end_reads(sock)  # its thread wakes from recv, answers 503 and gives its slot back
        return self._slots.acquire(timeout=self.evict_wait_s)

    def server_close(self) -> None:
        """Also end the reads still waiting, so that no handler thread outlives the server."""
        super().server_close()
        with self._lock:
            waiting = [c.sock for c in self._open.values() if c.reading]
        for sock in waiting:
            end_reads(sock)
        self.cut_log.flush()


def end_reads(sock: socket.socket) -> None:
    """Wake the thread waiting in *sock*'s recv or handshake (it reads end of file); its answer can still
    be sent. socket.socket's own shutdown: an SSLSocket's would drop its TLS state first."""
    with contextlib.suppress(OSError):  # the client is already gone
        socket.socket.shutdown(sock, socket.SHUT_RD)


def busy(sock: socket.socket, response: bytes) -> None:
    """*response* (a canned 503) to a connection with no thread to serve it, written without waiting
    (it is the accept loop's): what does not fit is dropped."""
    with contextlib.suppress(OSError):  # what did not fit, or a client gone: closed all the same
        sock.setblocking(False)
        sock.send(response)
