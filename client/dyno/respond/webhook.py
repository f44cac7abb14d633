"""The HTTP side of ``dyno respond``: Alertmanager's webhook, answered at once, the work queued.

``POST /alerts`` only (``GET /-/ready`` for a probe). Each request is checked in an order that spends
nothing on a stranger: the bearer token first (401), then the body's size from its Content-Length (411
without one, 413 over the bound: the body is never read), then the payload (400). A notification that
passes is handed to ``submit`` and answered 200; a full queue is 503, which Alertmanager retries, while
it gives up on any 4xx. Nothing here waits for a capture: the handler thread only parses and queues.
"""

from __future__ import annotations

import hmac
import json
import os
import threading
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
READ_TIMEOUT_S = 10.0  # a client that sends its body this slowly loses the connection
# Connections served at once: Alertmanager posts one at a time per receiver; beyond this a connection is
# closed unread, so clients that trickle bytes (the timeout is per read) cannot take every thread.
MAX_CONNECTIONS = 32


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


class Webhook(ThreadingHTTPServer):
    """The server; each request on a thread of its own, none of which outlives its request."""

    daemon_threads = True

    def __init__(
        self, address: Tuple[str, int], token: Optional[TokenFile], max_body: int, submit: Submit, log: Log
    ) -> None:
        self.token, self.max_body, self.submit, self.log = token, max_body, submit, log
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.log(f"{MAX_CONNECTIONS} connections open: closed one from {client_address[0]} unread")
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    server: Webhook
    timeout = READ_TIMEOUT_S
    server_version = "dyno-respond"

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
            return self.server.log(f"{self._who()}: POST {PATH}: body not received ({exc})")
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
        self.server.log(f"{self._who()}: {self.command} {self.path}: {code} ({why})")
        # The body of a refused request is not read: the connection cannot carry another request.
        self.close_connection = True
        self._answer(code, {"error": why}, headers)

    def _answer(self, code: int, doc: object, headers: Optional[Dict[str, str]] = None) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _who(self) -> str:
        return f"{self.client_address[0]}:{self.client_address[1]}"

    def log_message(self, format: str, *args: object) -> None:
        """http.server's own access log is off: each request is one line of ours."""
