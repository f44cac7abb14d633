"""The Prometheus exporter's HTTP server: prometheus_client's WSGI app on a thread per connection, with
the web configuration's TLS (:func:`serve`) and basic auth (:class:`BasicAuth`) in front of it.

prometheus_client's own ``start_http_server`` wraps the listening socket in TLS, so each handshake runs on
the one thread that accepts: a local user who connects and sends nothing stops every scrape. Here the
handshake runs on the connection's own thread.

The exporter shares the daemon's open files limit, and any local user can connect to it, so what a client
that sends slowly (slowloris) can hold, and for how long, is bounded as ``dyno respond``'s webhook bounds
it, by the same code (:mod:`msmonitor_contract.slow_clients`):

- a deadline for the whole request (:data:`REQUEST_TIMEOUT_S`): the TLS handshake, the request line and
  the headers, however the bytes trickle in. Each read waits only for the time left; a request not in by
  then is answered 408 and closed (a handshake not done, closed). A timeout per read never fires on a
  byte every 9 s.
- at most :data:`MAX_HEAD` of request line and headers (431): a scraper sends a few hundred bytes.
- :data:`MAX_CONNECTIONS` connections at once, a thread and a descriptor each. When all are taken, a new
  connection closes the oldest one still sending its request (or still in its handshake) and takes its
  place; when none is, it is answered 503 and closed at once. A client that trickles bytes over every
  connection it can open then holds none for long, and a scrape, which sends its request in a
  millisecond, gets through.
- the answer is sent within :data:`ANSWER_TIMEOUT_S`, to a client that reads it however slowly.

Basic auth checks a password with bcrypt (tens of ms by design), one at a time, waiting for that turn at
most :data:`BCRYPT_WAIT_S` and with at most :data:`BCRYPT_WAITERS` waiting: past either the request is
answered 503 (Retry-After), never made to queue behind every wrong password of a flood. A user and
password bcrypt verified are taken without it as long as they keep being used (:data:`VERIFIED_FOR_S`
after the last use), so a scraper whose password is verified never waits for bcrypt.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import io
import logging
import secrets
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Mapping, Optional, Tuple
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from msmonitor_contract.slow_clients import Connection, Cut, HeadReader, SlotServer, SparseLog

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("dynolog")

# The whole request, from the accept: TLS handshake, request line and headers. Prometheus sends its
# request in milliseconds; its scrape_timeout is 10 s by default.
REQUEST_TIMEOUT_S = 10.0
MAX_HEAD = 64 << 10  # request line and headers; a scraper sends a few hundred bytes
# Connections served at once, a thread and a descriptor each: a node has a scraper or two.
MAX_CONNECTIONS = 32
ANSWER_TIMEOUT_S = 10.0  # to send the page, however slowly the client reads it
CUT_LOG_EVERY_S = 60.0  # a warning per kind of cut request at most this often
# How long a verified user and password are taken without bcrypt again after their last use: bcrypt
# costs about 60 ms at cost 10 by design, and Prometheus scrapes every 15 s. The file cannot change while
# the daemon runs, so the limit only bounds how long an unused proof stays in memory.
VERIFIED_FOR_S = 300.0
_VERIFIED_MAX = 64
BCRYPT_WAIT_S = 1.0  # for the turn to check a password; past it, 503
BCRYPT_WAITERS = 16  # requests waiting for that turn (half the connections); one more: 503 at once


class _Writer(io.BufferedIOBase):
    """The answer's bytes, each write whole (http.server does not look at what a write returns)."""

    def __init__(self, connection: Connection) -> None:
        super().__init__()
        self.connection = connection

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        with memoryview(data) as whole, whole.cast("B") as view:
            sent = 0
            while sent < len(view):
                sent += self.connection.send(view[sent:])
            return sent


class _Handler(WSGIRequestHandler):
    """One request per connection (wsgiref's handler reads one), so the connection's deadline is the
    request's."""

    server: _Server

    def __init__(self, request: Any, client_address: Any, server: _Server, connection: Connection) -> None:
        self.state = connection
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # socketserver's own, replaced by ones that keep the deadline
        self.head = HeadReader(self.state, MAX_HEAD)
        self.rfile = io.BufferedReader(self.head)
        self.wfile = _Writer(self.state)
        # What a refusal names before the request line is read (http.server sets them as it reads it).
        self.requestline, self.request_version, self.command, self.path = "", "HTTP/1.0", "", ""

    def handle(self) -> None:
        try:
            super().handle()
        except Cut as cut:
            self.server.cut(cut.code, f"{self.client_address[0]}: {cut.code} ({cut.why})")
            self.server.answering(self.state)
            with contextlib.suppress(OSError):  # the client is gone, or not reading
                self.send_error(cut.code, cut.why)
        except OSError as exc:  # the client went away
            log.debug("Prometheus exporter: connection from %s lost: %s", self.client_address[0], exc)

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.head.head_left = None  # the headers are in
        self.server.answering(self.state)
        return parsed

    def log_message(self, format: str, *args: Any) -> None:
        """No line per scrape on stderr (wsgiref's default)."""


_BUSY_BODY = f"503 Service Unavailable: all {MAX_CONNECTIONS} connections are taken; retry\n".encode()
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain; charset=utf-8\r\n"
    + f"Content-Length: {len(_BUSY_BODY)}\r\nConnection: close\r\n\r\n".encode()
    + _BUSY_BODY
)


def _warn(line: str) -> None:
    log.warning("Prometheus exporter: %s", line)


class _Server(SlotServer, WSGIServer):
    daemon_threads = True  # a scrape in progress never holds up the daemon's exit
    # The listen backlog (the kernel caps it at net.core.somaxconn): a flood of connections waits there
    # for the accept loop, holding none of the daemon's descriptors.
    request_queue_size = socket.SOMAXCONN
    answer_timeout_s = ANSWER_TIMEOUT_S

    def __init__(self, address: Tuple[str, int], family: int, tls: Optional[ssl.SSLContext]) -> None:
        self.address_family = family  # read by TCPServer.__init__ when it makes the socket
        self.tls = tls
        # Plain HTTP on a TLS connection is no answer: a TLS one no slot is found for is closed unanswered.
        self.busy_response = _BUSY if tls is None else None
        self.init_slots(MAX_CONNECTIONS, SparseLog(_warn, CUT_LOG_EVERY_S))
        # finish_request makes each _Handler itself, with its connection's state.
        super().__init__(address, WSGIRequestHandler)

    def new_connection(self, request: Any) -> Connection:
        return Connection(request, REQUEST_TIMEOUT_S, evicted_why=f"all {MAX_CONNECTIONS} connections taken")

    def finish_request(self, request: Any, client_address: Any) -> None:
        state = self.connection(request)
        connection = request if self.tls is None else self._handshake(request, state, client_address)
        if connection is None:
            return
        try:
            _Handler(connection, client_address, self, state)
        finally:
            if connection is not request:
                connection.close()  # the plain socket was detached into it: shutdown_request cannot close it

    def _handshake(self, request: Any, state: Connection, client_address: Any) -> Optional[ssl.SSLSocket]:
        assert self.tls is not None
        try:
            connection = self.tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        except (ssl.SSLError, OSError) as exc:
            log.debug("Prometheus exporter: TLS with %s failed: %s", client_address[0], exc)
            return None
        with self._lock:
            state.sock = connection  # from here on, closing it to make room ends this one's reads
        try:
            state.handshake()
        except (ssl.SSLError, OSError) as exc:
            # No certificate, an untrusted one, plain HTTP, too slow, closed to make room: refused in the
            # handshake. DEBUG: any local user can cause it, and Prometheus shows the scrape's own error.
            log.debug("Prometheus exporter: TLS handshake with %s failed: %s", client_address[0], exc)
            connection.close()
            return None
        return connection


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


class _Busy(Exception):
    """No turn to check a password came in time: answered 503, which the scraper retries."""


class BasicAuth:
    """WSGI middleware: *app* for a user of *users* (name -> bcrypt hash) with the right password; any
    other request gets 401 and ``WWW-Authenticate: Basic``, as exporter-toolkit answers, or 503 when its
    password could not be checked in time (:data:`BCRYPT_WAIT_S`)."""

    def __init__(
        self, app: WSGIApplication, users: Mapping[str, bytes], clock: Callable[[], float] = time.monotonic
    ) -> None:
        import bcrypt  # the extra's: imported only when a web config names users

        self.app = app
        self.users = dict(users)
        self._checkpw = bcrypt.checkpw
        # One bcrypt at a time: a flood of wrong passwords keeps one core busy, not all; a scraper whose
        # password is verified already does not wait for it (the cache is checked first). A request waits
        # for its turn BCRYPT_WAIT_S at most, and BCRYPT_WAITERS at most wait: a flood's requests then
        # hold few of the connections, and none for long.
        self._bcrypt = threading.Lock()
        self._waiters = threading.BoundedSemaphore(BCRYPT_WAITERS)
        self._verified = _Verified(VERIFIED_FOR_S, _VERIFIED_MAX, clock)
        # A name that is no user is checked against this hash, at the users' highest cost: a refusal then
        # takes as long whether the name exists or not, and so does not tell which do.
        cost = max(int(h.split(b"$")[2]) for h in self.users.values())
        self._decoy = bcrypt.hashpw(secrets.token_urlsafe(16).encode(), bcrypt.gensalt(cost))
        self._said = SparseLog(_warn, CUT_LOG_EVERY_S)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        try:
            allowed = self.allowed(environ.get("HTTP_AUTHORIZATION", ""))
        except _Busy as busy:
            self._said("bcrypt", f"503 to {environ.get('REMOTE_ADDR')}: {busy}")
            start_response(
                "503 Service Unavailable",
                [("Retry-After", "1"), ("Content-Type", "text/plain; charset=utf-8")],
            )
            return [f"503 Service Unavailable: {busy}; retry\n".encode()]
        if allowed:
            return self.app(environ, start_response)
        start_response(
            "401 Unauthorized",
            [("WWW-Authenticate", 'Basic realm="dynolog"'), ("Content-Type", "text/plain; charset=utf-8")],
        )
        return [b"401 Unauthorized: the exporter needs a user and password (--prometheus-web-config)\n"]

    def allowed(self, authorization: str) -> bool:
        """Whether the ``Authorization`` header's user and password match one of the users; _Busy when
        bcrypt had to check them and its turn did not come in time."""
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
        if not self._waiters.acquire(blocking=False):
            raise _Busy(f"{BCRYPT_WAITERS} password checks are waiting already")
        try:
            if not self._bcrypt.acquire(timeout=BCRYPT_WAIT_S):
                raise _Busy(f"no turn to check the password within {BCRYPT_WAIT_S:g}s")
        finally:
            self._waiters.release()
        try:
            return bool(self._checkpw(password, hashed))
        except ValueError:  # over bcrypt's 72 bytes (bcrypt 5 refuses such passwords): not a match
            return False
        finally:
            self._bcrypt.release()


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
    """Users and passwords bcrypt verified lately, each for *ttl_s* after its last use (a scraper that
    keeps scraping never needs bcrypt again). Kept as HMACs under a key of this process, never the
    passwords themselves; *clock* is time.monotonic but in tests."""

    def __init__(self, ttl_s: float, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._size = size
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._until: Dict[bytes, float] = {}  # the least lately used first
        self._lock = threading.Lock()  # scrapes run on threads of their own

    def proof(self, user: str, password: bytes) -> bytes:
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        for part in (user.encode("utf-8"), password):
            mac.update(len(part).to_bytes(8, "big") + part)  # length-prefixed: no two pairs collide
        return mac.digest()

    def holds(self, proof: bytes) -> bool:
        """Whether *proof* is verified and not expired; if so, it is kept *ttl_s* from now."""
        now = self._clock()
        with self._lock:
            until = self._until.pop(proof, None)
            if until is None or now >= until:
                return False
            self._until[proof] = now + self._ttl_s  # last in the order: the last to be dropped for room
        return True

    def add(self, proof: bytes) -> None:
        now = self._clock()
        with self._lock:
            for stale in [p for p, until in self._until.items() if until <= now]:
                del self._until[stale]
            while len(self._until) >= self._size:  # the least lately used first (dicts keep order)
                del self._until[next(iter(self._until))]
            self._until[proof] = now + self._ttl_s
