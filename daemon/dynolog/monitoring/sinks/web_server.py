"""The Prometheus exporter's HTTP server: prometheus_client's WSGI app on a thread per connection, with
the web configuration's TLS (:func:`serve`) and basic auth (:class:`BasicAuth`) in front of it.

prometheus_client's own ``start_http_server`` wraps the listening socket in TLS, so each handshake runs on
the one thread that accepts: a local user who connects and sends nothing stops every scrape. Here the
handshake runs on the connection's own thread, under a timeout.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import socket
import ssl
import threading
import time
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any, Dict, Iterable, Mapping, Optional, Tuple
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("dynolog")

# A connection that says nothing (no handshake, no request) for this long is closed, freeing its thread.
CONNECTION_TIMEOUT_S = 10.0
# How long a verified user and password are taken without bcrypt again: bcrypt costs about 60 ms at cost
# 10 by design, and Prometheus scrapes every 15 s. The file cannot change while the daemon runs, so the
# limit only bounds how long the proof stays in memory.
VERIFIED_FOR_S = 300.0
_VERIFIED_MAX = 64


class _Handler(WSGIRequestHandler):
    timeout = CONNECTION_TIMEOUT_S  # applied by StreamRequestHandler.setup to the connection

    def log_message(self, format: str, *args: Any) -> None:
        """No line per scrape on stderr (wsgiref's default)."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape in progress never holds up the daemon's exit

    def __init__(self, address: Tuple[str, int], family: int, tls: Optional[ssl.SSLContext]) -> None:
        self.address_family = family  # read by TCPServer.__init__ when it makes the socket
        self.tls = tls
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(CONNECTION_TIMEOUT_S)  # the handshake too: one silent client holds one thread
        try:
            connection = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            # No certificate, an untrusted one, plain HTTP, a timeout: refused in the handshake. DEBUG:
            # any local user can cause it, and Prometheus shows the scrape's own error.
            log.debug("Prometheus exporter: TLS handshake with %s failed: %s", client_address[0], exc)
            return
        try:
            super().finish_request(connection, client_address)
        finally:
            connection.close()  # the plain socket was detached into it: shutdown_request cannot close it


def serve(
    address: str, port: int, app: WSGIApplication, tls: Optional[ssl.SSLContext]
) -> Tuple[WSGIServer, threading.Thread]:
    """Serve *app* on *address*:*port* (0: a free port), in TLS under *tls*, on a daemon thread."""
    family, _, _, _, sockaddr = socket.getaddrinfo(
        address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    server = _Server((str(sockaddr[0]), port), family, tls)
    server.set_app(app)
    thread = threading.Thread(target=server.serve_forever, name="prometheus-exporter", daemon=True)
    thread.start()
    return server, thread


class BasicAuth:
    """WSGI middleware: *app* for a user of *users* (name -> bcrypt hash) with the right password; any
    other request gets 401 and ``WWW-Authenticate: Basic``, as exporter-toolkit answers."""

    def __init__(self, app: WSGIApplication, users: Mapping[str, bytes]) -> None:
        import bcrypt  # the extra's: imported only when a web config names users

        self.app = app
        self.users = dict(users)
        self._checkpw = bcrypt.checkpw
        # One bcrypt at a time: a flood of wrong passwords keeps one core busy, not all; a scraper whose
        # password is verified already does not wait for it (the cache is checked first).
        self._bcrypt = threading.Lock()
        self._verified = _Verified(VERIFIED_FOR_S, _VERIFIED_MAX)
        # A name that is no user is checked against this hash, at the users' highest cost: a refusal then
        # takes as long whether the name exists or not, and so does not tell which do.
        cost = max(int(h.split(b"$")[2]) for h in self.users.values())
        self._decoy = bcrypt.hashpw(secrets.token_urlsafe(16).encode(), bcrypt.gensalt(cost))

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if self.allowed(environ.get("HTTP_AUTHORIZATION", "")):
            return self.app(environ, start_response)
        start_response(
            "401 Unauthorized",
            [("WWW-Authenticate", 'Basic realm="dynolog"'), ("Content-Type", "text/plain; charset=utf-8")],
        )
        return [b"401 Unauthorized: the exporter needs a user and password (--prometheus-web-config)\n"]

    def allowed(self, authorization: str) -> bool:
        """Whether the ``Authorization`` header's user and password match one of the users."""
        credentials = _basic_credentials(authorization)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self.users.get(user)
        proof = self._verified.proof(user, password)
        if hashed is not None and self._verified.holds(proof):
            return True
        matches = self._check(password, self._decoy if hashed is None else hashed)
        if hashed is None or not matches:
            return False
        self._verified.add(proof)
        return True

    def _check(self, password: bytes, hashed: bytes) -> bool:
        with self._bcrypt:
            try:
                return bool(self._checkpw(password, hashed))
            except ValueError:  # over bcrypt's 72 bytes (bcrypt 5 refuses such passwords): not a match
                return False


def _basic_credentials(authorization: str) -> Optional[Tuple[str, bytes]]:
    """(user, password) of a ``Basic`` header, or None for any other or a malformed one."""
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
        user, colon, password = decoded.partition(b":")
        return (user.decode("utf-8"), password) if colon else None
    except ValueError:  # not base64 (binascii.Error), not ASCII, or a name that is not UTF-8
        return None


class _Verified:
    """Users and passwords bcrypt verified lately, each for *ttl_s*. Kept as HMACs under a key of this
    process, never the passwords themselves."""

    def __init__(self, ttl_s: float, size: int) -> None:
        self._ttl_s = ttl_s
        self._size = size
        self._key = secrets.token_bytes(32)
        self._until: Dict[bytes, float] = {}
        self._lock = threading.Lock()  # scrapes run on threads of their own

    def proof(self, user: str, password: bytes) -> bytes:
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        for part in (user.encode("utf-8"), password):
            mac.update(len(part).to_bytes(8, "big") + part)  # length-prefixed: no two pairs collide
        return mac.digest()

    def holds(self, proof: bytes) -> bool:
        with self._lock:
            until = self._until.get(proof)
        return until is not None and time.monotonic() < until

    def add(self, proof: bytes) -> None:
        now = time.monotonic()
        with self._lock:
            for stale in [p for p, until in self._until.items() if until <= now]:
                del self._until[stale]
            while len(self._until) >= self._size:  # the oldest first (dicts keep insertion order)
                del self._until[next(iter(self._until))]
            self._until[proof] = now + self._ttl_s
