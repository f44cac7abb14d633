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
The mechanism is :mod:`msmonitor_contract.slow_clients`, which the daemon's Prometheus exporter shares.
"""

from __future__ import annotations

import hmac
import io
import json
import os
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from msmonitor_contract.numbers import strict_int
from msmonitor_contract.slow_clients import Connection, Cut, HeadReader, SlotServer, SparseLog

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


_BUSY_BODY = json.dumps({"error": "busy: every connection slot taken; retry later"}).encode()
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(_BUSY_BODY)}\r\n\r\n".encode()
    + _BUSY_BODY
)


class Webhook(SlotServer, ThreadingHTTPServer):
    """The server; each request on a thread of its own, none of which outlives its request."""

    daemon_threads = True
    # The listen backlog (the kernel caps it at net.core.somaxconn): a flood of connections waits there
    # for the accept loop; past it the kernel drops new ones unseen, a real post's among them, and its
    # client waits for a SYN retransmission (1 s, then 3 s, 7 s ...).
    request_queue_size = socket.SOMAXCONN
    busy_response = _BUSY

    def __init__(
        self, address: Tuple[str, int], token: Optional[TokenFile], submit: Submit, log: Log, limits: Limits
    ) -> None:
        self.token, self.submit, self.log, self.limits = token, submit, log, limits
        self.init_slots(limits.connections, SparseLog(log, CUT_LOG_EVERY_S))
        super().__init__(address, _Handler)

    @property
    def max_body(self) -> int:
        return self.limits.max_body

    def new_connection(self, request: Any) -> Connection:
        return Connection(request, self.limits.request_timeout, " (--request-timeout)")

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    """One request per connection (http.server's HTTP/1.0 closes after each answer), so the connection's
    deadline is the request's."""

    server: Webhook
    server_version = "dyno-respond"

    def setup(self) -> None:
        super().setup()
        self.connection_state = self.server.connection(self.request)
        self.rfile.close()  # http.server's own, replaced by one that keeps the deadline
        self.head = HeadReader(self.connection_state, MAX_HEAD)
        self.rfile = io.BufferedReader(self.head)
        # What a refusal names before the request line is read (http.server sets them as it reads it).
        self.requestline, self.request_version, self.command, self.path = "", "HTTP/1.0", "", ""

    def handle(self) -> None:
        try:
            try:
                self.handle_one_request()
            except Cut as cut:
                self.server.cut(cut.code, f"{self._who()}: {self._what()}: {cut.code} ({cut.why})")
                self._answer(cut.code, {"error": cut.why}, cut.headers)
        except OSError as exc:  # the client went away, or stopped reading its answer
            self.server.cut("lost", f"{self._who()}: connection lost ({exc})")

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
            return self.server.cut("lost", f"{self._who()}: POST {PATH}: body not received ({exc})")
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
