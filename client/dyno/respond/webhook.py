"""The HTTP side of ``dyno respond``: Alertmanager's webhook, answered at once, the work queued.

``POST /alerts`` only (``GET /-/ready`` for a probe). Each request is checked in an order that spends
nothing on a stranger: the bearer token first, as soon as the headers are in (401), then the body's size
from its Content-Length (411 without one, 413 over the bound: the body is never read), then the payload
(400). A notification that passes is handed to ``submit`` and answered 200; a full queue is 503, which
Alertmanager retries, while it gives up on any 4xx. Nothing here waits for a capture: the handler thread
only parses and queues.

What a client that sends slowly (slowloris) can hold, and for how long, is bounded three ways:

- a deadline for the whole request (request line, headers and body: ``--request-timeout``, 10 s), however
  the bytes trickle in: each read waits only for the time left, and a request not in by then is answered
  408 and closed. (A timeout per read never fires on a byte every 9 s.)
- at most 64 KiB of request line and headers (431): Alertmanager's are a few hundred bytes.
- ``connections`` requests at once (128), each on a thread; when all are taken, a new connection closes
  the oldest one still sending its request (answered 503, which Alertmanager retries) and takes its
  place. A client that trickles bytes over every connection it can open then holds none for long: to
  push out a real post it must open ``connections`` new ones in the milliseconds that post takes to
  arrive. (A cap per address would not do: every local user, Alertmanager included, is 127.0.0.1.)
  A connection no thread can be started for (the process's thread limit) is answered 503 at once and
  holds no slot.

Such an attacker can have thousands of requests cut a second: they are logged once per kind every
:data:`CUT_LOG_EVERY_S`, and new connections wait in a listen backlog as long as the kernel allows.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import json
import math
import os
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from msmonitor_contract.numbers import strict_int

from ..exits import EXIT_USAGE, CliError
from .alerts import BadPayload, Notification, parse

PATH = "/alerts"
READY_PATH = "/-/ready"
REALM = 'Bearer realm="dyno respond"'
DEFAULT_MAX_BODY = 1 << 20  # Alertmanager's max_alerts 50 is a few tens of KiB
REQUEST_TIMEOUT_S = 10.0  # the whole request; Alertmanager's arrives in milliseconds
MAX_CONNECTIONS = 128  # requests served at once, a thread each (most of them waiting in a read)
MAX_HEAD = 64 << 10  # request line and headers; Alertmanager sends a few hundred bytes
ANSWER_TIMEOUT_S = 5.0  # an answer is under 1 KiB: it fits the socket's buffer, whoever does not read it
EVICT_WAIT_S = 1.0  # for the thread of a connection closed to make room to give back its slot
CUT_LOG_EVERY_S = 10.0  # a line per kind of cut request at most this often; the others counted in it


@dataclass(frozen=True)
class Limits:
    """What one request, and all of them together, may take (see the module's docstring)."""

    max_body: int = DEFAULT_MAX_BODY
    request_timeout: float = REQUEST_TIMEOUT_S
    connections: int = MAX_CONNECTIONS


class QueueFull(Exception):
    """The responder has as much work queued as it may hold: answered 503 (Alertmanager retries)."""


Submit = Callable[[Notification], int]  # queues it; returns the number waiting, or raises QueueFull
Log = Callable[[str], None]


def read_token(path: str) -> bytes:
    """The bearer token in *path*, stripped as Alertmanager strips its ``credentials_file``; refused when
    group or others may read it (like a private key) or when it is empty."""
    from dynocerts.keys import owner_only  # the rule private keys and their password files follow

    try:
        loose = owner_only(Path(path), "token")
        with open(path, "rb") as f:
            token = f.read().strip()
    except OSError as exc:
        raise CliError(f"--token-file {path}: {exc.strerror}", EXIT_USAGE) from None
    if loose is not None:
        raise CliError(f"--token-file {loose}", EXIT_USAGE)
    if not token:
        raise CliError(f"--token-file {path} is empty: write the token Alertmanager sends", EXIT_USAGE)
    return token


class TokenFile:
    """The bearer token of ``--token-file``, read again whenever the file changes: Alertmanager reads its
    ``credentials_file`` on every request, so a rotated token needs no restart on either side. A change
    that leaves the file unusable (half written, readable by others) keeps the token it had, logged,
    until the file is right again: the tokens Alertmanager sends meanwhile are not refused for it."""

    def __init__(self, path: str, log: Log) -> None:
        self.path, self.log = path, log
        self._lock = threading.Lock()
        self._stamp = self._read_stamp()
        self._token = read_token(path)  # a bad file is refused at start

    def current(self) -> bytes:
        with self._lock:
            stamp = self._read_stamp()
            if stamp != self._stamp:
                try:
                    self._token = read_token(self.path)
                    self._stamp = stamp
                except CliError as exc:  # looked at again on the next request
                    self.log(f"{exc}: the token read before stays in use")
            return self._token

    def _read_stamp(self) -> Tuple[int, int, int]:
        try:
            st = os.stat(self.path)
        except OSError:
            return (0, 0, 0)  # gone for a moment (replaced by a rename): read_token says why
        return (st.st_ino, st.st_mtime_ns, st.st_size)


class _SparseLog:
    """At most one line per kind every *every* seconds, the lines held back counted in the next one: a
    client can have requests cut by the thousand a second, and a line each would fill the log (and hold
    handler threads on a slow one)."""

    def __init__(self, log: Log, every: float) -> None:
        self.log, self.every = log, every
        self._lock = threading.Lock()
        self._next: Dict[object, float] = {}
        self._held: Dict[object, int] = {}

    def __call__(self, kind: object, line: str) -> None:
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


class _Cut(Exception):
    """The request is not read any further: answered *code*, the connection closed."""

    def __init__(self, code: int, why: str, headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(why)
        self.code, self.why, self.headers = code, why, headers


class _Connection:
    """One accepted connection: its deadline, and whether it may still be closed to make room (it is
    still sending its request) or was."""

    def __init__(self, sock: socket.socket, deadline: float, timeout: float) -> None:
        self.sock, self.deadline, self.timeout = sock, deadline, timeout
        self.reading = True
        self.evicted = False

    def recv_into(self, view: memoryview) -> int:
        """Bytes into *view*, waiting no longer than the request's deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._late()
        self.sock.settimeout(left)  # the time left, not a fresh timeout per read
        try:
            count = self.sock.recv_into(view)
        except socket.timeout:
            raise self._late() from None
        if count == 0 and self.evicted:  # the read was ended by shutdown(SHUT_RD), not by the client
            raise _Cut(503, "closed for a newer connection: every slot taken", {"Retry-After": "1"})
        return count

    def _late(self) -> _Cut:
        return _Cut(408, f"request not in within {self.timeout:g}s (--request-timeout)")


class _Reader(io.RawIOBase):
    """The connection's bytes for http.server's buffered reads: within the deadline, and no more than
    :data:`MAX_HEAD` of them until the headers are read (then the body's Content-Length bounds them)."""

    def __init__(self, connection: _Connection) -> None:
        super().__init__()
        self.connection = connection
        self.head_left: Optional[int] = MAX_HEAD

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self.head_left is not None:
            if self.head_left <= 0:  # a read asked for while the headers are still not complete
                raise _Cut(431, f"request line and headers over {MAX_HEAD // 1024} KiB")
            view = view[: self.head_left]
        count = self.connection.recv_into(view)
        if self.head_left is not None:
            self.head_left -= count
        return count


class Webhook(ThreadingHTTPServer):
    """The server; each request on a thread of its own, none of which outlives its request."""

    daemon_threads = True
    # The listen backlog (the kernel caps it at net.core.somaxconn): a flood of connections waits there
    # for the accept loop; past it the kernel drops new ones unseen, a real post's among them, and its
    # client waits for a SYN retransmission (1 s, then 3 s, 7 s ...).
    request_queue_size = socket.SOMAXCONN

    def __init__(
        self, address: Tuple[str, int], token: Optional[TokenFile], submit: Submit, log: Log, limits: Limits
    ) -> None:
        self.token, self.submit, self.log, self.limits = token, submit, log, limits
        self.log_cut = _SparseLog(log, CUT_LOG_EVERY_S)
        self._slots = threading.BoundedSemaphore(limits.connections)
        self._lock = threading.Lock()
        self._open: Dict[socket.socket, _Connection] = {}  # in the order accepted: the oldest first
        super().__init__(address, _Handler)

    @property
    def max_body(self) -> int:
        return self.limits.max_body

    def process_request(self, request: Any, client_address: Any) -> None:
        timeout = self.limits.request_timeout
        connection = _Connection(request, time.monotonic() + timeout, timeout)
        if not self._slots.acquire(blocking=False) and not self._make_room():
            self.log_cut(
                "busy", f"{client_address[0]}:{client_address[1]}: 503 (every slot taken, none freed in time)"
            )
            _busy(request)
            self.shutdown_request(request)
            return
        with self._lock:
            self._open[request] = connection
        try:
            super().process_request(request, client_address)
        except Exception as exc:  # no thread for it (RuntimeError: can't start new thread): 503, not a leak
            self._give_back(request)
            self.log_cut(
                "no thread", f"{client_address[0]}:{client_address[1]}: 503 (no thread to serve it: {exc})"
            )
            _busy(request)
            self.shutdown_request(request)
        except BaseException:
            self._give_back(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._give_back(request)

    def _give_back(self, request: Any) -> None:
        """*request*'s slot, once: by its thread as it ends, or by the accept loop where no thread started."""
        with self._lock:
            held = self._open.pop(request, None) is not None
        if held:
            self._slots.release()

    def connection(self, request: socket.socket) -> _Connection:
        with self._lock:
            return self._open[request]

    def answering(self, connection: _Connection) -> None:
        """*connection*'s request is read: it is no longer one to close to make room."""
        with self._lock:
            connection.reading = False

    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    def server_close(self) -> None:
        """Also end the reads still waiting, so that no handler thread outlives the server."""
        super().server_close()
        with self._lock:
            waiting = [c for c in self._open.values() if c.reading]
        for connection in waiting:
            _end_reads(connection.sock)
        self.log_cut.flush()

    def _make_room(self) -> bool:
        """Close the oldest connection still sending its request and take its slot; False when none
        is, or its thread did not give the slot back within :data:`EVICT_WAIT_S`."""
        with self._lock:
            oldest = next((c for c in self._open.values() if c.reading), None)
            if oldest is None:
                return False
            oldest.reading, oldest.evicted = False, True
        _end_reads(oldest.sock)  # its thread wakes from recv, answers 503 and gives its slot back
        return self._slots.acquire(timeout=EVICT_WAIT_S)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


def _end_reads(sock: socket.socket) -> None:
    """Wake the thread waiting in *sock*'s recv (it reads end of file); its answer can still be sent."""
    with contextlib.suppress(OSError):  # the client is already gone
        sock.shutdown(socket.SHUT_RD)


_BUSY_BODY = json.dumps({"error": "busy: every connection slot taken; retry later"}).encode()
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(_BUSY_BODY)}\r\n\r\n".encode()
    + _BUSY_BODY
)


def _busy(request: socket.socket) -> None:
    """503 to a connection with no thread to serve it, written without waiting (it is the accept loop's)."""
    with contextlib.suppress(OSError):  # what did not fit, or a client gone: closed all the same
        request.setblocking(False)
        request.send(_BUSY)


class _Handler(BaseHTTPRequestHandler):
    """One request per connection (http.server's HTTP/1.0 closes after each answer), so the connection's
    deadline is the request's."""

    server: Webhook
    server_version = "dyno-respond"

    def setup(self) -> None:
        super().setup()
        self.connection_state = self.server.connection(self.request)
        self.rfile.close()  # http.server's own, replaced by one that keeps the deadline
        self.head = _Reader(self.connection_state)
        self.rfile = io.BufferedReader(self.head)
        # What a refusal names before the request line is read (http.server sets them as it reads it).
        self.requestline, self.request_version, self.command, self.path = "", "HTTP/1.0", "", ""

    def handle(self) -> None:
        try:
            try:
                self.handle_one_request()
            except _Cut as cut:
                self.server.log_cut(cut.code, f"{self._who()}: {self._what()}: {cut.code} ({cut.why})")
                self._answer(cut.code, {"error": cut.why}, cut.headers)
        except OSError as exc:  # the client went away, or stopped reading its answer
            self.server.log_cut("lost", f"{self._who()}: connection lost ({exc})")

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.head.head_left = None  # the headers are in: from here the body's Content-Length bounds it
        return parsed

    def do_GET(self) -> None:
        if self.path == READY_PATH:
            self._answer(200, {"ready": True})
        elif self.path == PATH:
            self._refuse(405, f"{PATH} takes POST", {"Allow": "POST"})
        else:
            self._refuse(404, "not found")

    def do_POST(self) -> None:
        if self.path != PATH:
            return self._refuse(404, f"not found: POST {PATH}")
        why = self._unauthorised()
        if why:
            return self._refuse(401, why, {"WWW-Authenticate": REALM})
        length = self._length()
        if length is None:
            return
        try:
            notification = parse(self.rfile.read(length))
        except BadPayload as exc:
            return self._refuse(400, f"not an Alertmanager notification: {exc}")
        except OSError as exc:  # the client stopped sending, or sent too slowly
            return self.server.log_cut("lost", f"{self._who()}: POST {PATH}: body not received ({exc})")
        try:
            waiting = self.server.submit(notification)
        except QueueFull:
            return self._refuse(503, "busy: too many notifications queued; retry later", {"Retry-After": "5"})
        self.server.log(f"{self._who()}: notification {notification.summary()} (queued, {waiting} waiting)")
        self._answer(200, {"queued": waiting})

    def _unauthorised(self) -> str:
        """Why the request may not pass, or "" when it may."""
        if self.server.token is None:
            return ""
        expected = self.server.token.current()
        scheme, _, presented = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return "no bearer token"
        if not hmac.compare_digest(presented.strip().encode(), expected):
            return "wrong bearer token"
        return ""

    def _length(self) -> Optional[int]:
        """The body's length from Content-Length, or None once the request was answered for it."""
        text = self.headers.get("Content-Length")
        if text is None:
            self._refuse(411, "Content-Length required")
            return None
        length = strict_int(text)
        if length is None:
            self._refuse(400, f"Content-Length {text!r} is not a number")
            return None
        if length > self.server.max_body:
            self._refuse(413, f"body of {length} bytes: at most {self.server.max_body} (--max-body)")
            return None
        return length

    def _refuse(self, code: int, why: str, headers: Optional[Dict[str, str]] = None) -> None:
        self.server.log(f"{self._who()}: {self._what()}: {code} ({why})")
        # The body of a refused request is not read: the connection cannot carry another request.
        self.close_connection = True
        self._answer(code, {"error": why}, headers)

    def _answer(self, code: int, doc: object, headers: Optional[Dict[str, str]] = None) -> None:
        self.server.answering(self.connection_state)
        self.connection.settimeout(ANSWER_TIMEOUT_S)  # not what was left of the deadline
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _what(self) -> str:
        return f"{self.command} {self.path}" if self.command else "request"  # cut before its first line

    def _who(self) -> str:
        return f"{self.client_address[0]}:{self.client_address[1]}"

    def log_message(self, format: str, *args: object) -> None:
        """http.server's own access log is off: each request is one line of ours."""
