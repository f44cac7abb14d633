"""The Prometheus exporter under ``--prometheus-web-config`` (exporter-toolkit's web configuration),
against the real daemon: the attack of issue 34 item 9, any local user reading the exporter, is refused
(401 without a user's password; no TLS handshake without a trusted client certificate), while a
scraper with the credentials reads a page prometheus_client's own parser takes. A bad file stops the
start with a line naming the file and the problem."""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import selectors
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import bcrypt
import pytest
from prometheus_client.parser import text_string_to_metric_families

import certs_factory as cf
from dynocerts.policy import Role
from dynolog.config import parse_args
from dynolog.monitoring.sinks import web_server
from dynolog.monitoring.sinks.web_config import EXTRA, WebConfigError, load
from harness import REPO, Daemon, free_port, wait_until

USER, PASSWORD = "prometheus", "correct horse battery staple"
# Cost 4, bcrypt's least: each verification then takes about 1 ms, not the 60 ms of the usual 10.
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
# What every failed read raises: an HTTP answer (HTTPError: 401) or a connection the server refused.
Refusal = (urllib.error.URLError, ssl.SSLError, ConnectionError, http.client.HTTPException)


@dataclass(frozen=True)
class Pki:
    """A CA, the exporter's certificate, a client certificate of that CA and one of another CA."""

    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    def cert(self, name: str) -> Path:
        return self.folder / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.folder / f"{name}.key"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    out = Pki(tmp_path_factory.mktemp("pki"))
    ca, stranger = cf.authority(), cf.authority(cn="Another CA")
    cf.write(out.ca, cf.pem(ca.cert))
    for name, issuer, role in (
        ("server", ca, Role.SERVER),
        ("prometheus", ca, Role.CLIENT),
        ("stranger", stranger, Role.CLIENT),
    ):
        issued = cf.leaf(issuer, role, name)
        cf.write(out.cert(name), cf.pem(issued.cert))
        cf.write(out.key(name), cf.key_pem(issued.key))
    return out


def web_config(folder: Path, text: str) -> Path:
    path = folder / "web-config.yml"
    path.write_text(text)
    return path


def exporter_of(start_daemon: Callable[..., Daemon], config: Path) -> Tuple[Daemon, int]:
    """A real daemon serving Prometheus under *config*, and its exporter's port."""
    port = free_port()
    return start_daemon("--prometheus-port", str(port), "--prometheus-web-config", str(config)), port


def exporter(start_daemon: Callable[..., Daemon], config: Path) -> int:
    """A real daemon serving Prometheus under *config*; its exporter's port."""
    return exporter_of(start_daemon, config)[1]


def scrape(url: str, user: Optional[str] = None, password: str = "", **tls: ssl.SSLContext) -> List[str]:
    """The metric families of the page at *url*, read as Prometheus reads it."""
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=10, **tls) as response:
        text = response.read().decode()
    return [family.name for family in text_string_to_metric_families(text)]


def refused(read: Callable[[], object]) -> BaseException:
    with pytest.raises(Refusal) as caught:
        read()
    return caught.value


def client_tls(pki: Pki, name: Optional[str]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if name is not None:
        context.load_cert_chain(pki.cert(name), pki.key(name))
    return context


def test_basic_auth_refuses_a_local_reader_without_the_password(
    tmp_path: Path, start_daemon: Callable[..., Daemon]
) -> None:
    port = exporter(start_daemon, web_config(tmp_path, f"basic_auth_users:\n  {USER}: {HASH}\n"))
    url = f"http://127.0.0.1:{port}/metrics"

    for user, password in ((None, ""), (USER, "wrong"), ("nobody", PASSWORD), ("", "")):
        error = refused(lambda u=user, p=password: scrape(url, u, p))  # type: ignore[misc]
        assert isinstance(error, urllib.error.HTTPError) and error.code == 401, (user, error)
        assert error.headers["WWW-Authenticate"].startswith("Basic"), error.headers
        assert b"msmonitor" not in error.read()

    families = scrape(url, USER, PASSWORD)
    assert {"msmonitor_records", "dynolog_dropped"} <= set(families), families
    assert families == scrape(url, USER, PASSWORD)  # again, from the verified cache


def tls_config(pki: Pki, extra: str = "") -> str:
    """Relative file names, as exporters read them: from the web configuration's own folder."""
    return (
        "tls_server_config:\n"
        f"  cert_file: {pki.cert('server').name}\n"
        f"  key_file: {pki.key('server').name}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_ca_file: {pki.ca.name}\n"
        "  min_version: TLS12\n" + extra
    )


def test_tls_refuses_a_local_reader_without_a_trusted_client_certificate(
    pki: Pki, start_daemon: Callable[..., Daemon]
) -> None:
    port = exporter(start_daemon, web_config(pki.folder, tls_config(pki)))
    url = f"https://127.0.0.1:{port}/metrics"

    for name in (None, "stranger"):  # no certificate; one of another CA
        error = refused(lambda n=name: scrape(url, context=client_tls(pki, n)))  # type: ignore[misc]
        assert not isinstance(error, urllib.error.HTTPError), error  # refused before any HTTP
    refused(lambda: scrape(f"http://127.0.0.1:{port}/metrics"))  # plain HTTP to the TLS port

    families = scrape(url, context=client_tls(pki, "prometheus"))
    assert "msmonitor_records" in families, families


def test_tls_and_basic_auth_together_and_a_silent_connection_holds_up_no_scrape(
    pki: Pki, start_daemon: Callable[..., Daemon]
) -> None:
    text = tls_config(pki) + f"basic_auth_users:\n  {USER}: {HASH}\n"
    port = exporter(start_daemon, web_config(pki.folder, text))
    url = f"https://127.0.0.1:{port}/metrics"
    # A local user connects and never starts the handshake: with the handshake on the accepting thread
    # (prometheus_client's start_http_server) no scrape would get through until it gave up.
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        error = refused(lambda: scrape(url, context=client_tls(pki, "prometheus")))
        assert isinstance(error, urllib.error.HTTPError) and error.code == 401, error
        assert "msmonitor_records" in scrape(url, USER, PASSWORD, context=client_tls(pki, "prometheus"))


BAD_FILES: Dict[str, tuple] = {
    "unknown key": ("basic_auth_user:\n  a: b\n", "unknown key 'basic_auth_user'"),
    "unknown TLS key": (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  certfile: x\n",
        "unknown key 'certfile' in tls_server_config",
    ),
    "missing certificate": (
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
        "tls_server_config.cert_file {folder}/missing.crt: no such file",
    ),
    "bad hash": (f"basic_auth_users:\n  {USER}: doe\n", f"basic_auth_users.{USER}: not a bcrypt hash"),
    "unsupported key": (
        "rate_limit:\n  interval: 1s\n  burst: 20\n",
        "'rate_limit' is exporter-toolkit's but dynolog does not support it",
    ),
    "unverified client certificates": (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "  client_auth_type: RequireAnyClientCert\n",
        "RequireAnyClientCert accepts unverified client certificates",
    ),
    "CA without a policy": (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n",
        "client_ca_file is given but client_auth_type does not verify",
    ),
    "not YAML": ("basic_auth_users: [\n", "not YAML"),
    "key of another certificate": (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: prometheus.key\n",
        "cannot use cert_file",
    ),
}


def start_fails(tmp_path: Path, *args: str, env: Optional[Dict[str, str]] = None) -> List[str]:
    """Run the daemon with *args*, which must stop its start: the lines it wrote on stderr."""
    daemon = Daemon(tmp_path / "daemon", ("--prometheus-port", str(free_port()), *args), env=env or {})
    try:
        result = subprocess.run(
            daemon.command(), capture_output=True, text=True, timeout=30, env={**os.environ, **daemon.env}
        )
    finally:
        daemon.cleanup()
    assert result.returncode == 1, result
    return result.stderr.splitlines()


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_web_config_stops_the_start_naming_the_file_and_the_problem(
    pki: Pki, tmp_path: Path, case: str
) -> None:
    text, problem = BAD_FILES[case]
    folder = tmp_path / "conf"
    folder.mkdir()
    for name in ("server.crt", "server.key", "ca.crt", "prometheus.key"):
        (folder / name).write_bytes((pki.folder / name).read_bytes())
    config = web_config(folder, text)
    lines = start_fails(tmp_path, "--web.config.file", str(config))
    assert len(lines) == 1 and lines[0].startswith(f"dynolog: --prometheus-web-config {config}: "), lines
    assert problem.format(folder=folder) in lines[0], lines


def test_a_missing_web_config_stops_the_start(tmp_path: Path) -> None:
    absent = tmp_path / "absent.yml"
    lines = start_fails(tmp_path, "--prometheus-web-config", str(absent))
    assert lines == [f"dynolog: --prometheus-web-config {absent}: cannot read it: No such file or directory"]


def test_without_the_extra_the_flag_stops_the_start_naming_it(tmp_path: Path) -> None:
    site = tmp_path / "without_extra"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['yaml'] = sys.modules['bcrypt'] = None\n")
    config = web_config(tmp_path, f"basic_auth_users:\n  {USER}: {HASH}\n")
    lines = start_fails(tmp_path, "--prometheus-web-config", str(config), env={"PYTHONPATH": str(site)})
    assert len(lines) == 1 and "needs PyYAML and bcrypt" in lines[0] and EXTRA in lines[0], lines


def test_the_flag_in_each_spelling_and_in_a_flagfile(tmp_path: Path) -> None:
    for argv in (
        ["--prometheus-web-config", "w.yml"],
        ["--prometheus_web_config=w.yml"],
        ["--web.config.file", "w.yml"],
        ["-web.config.file=w.yml"],
    ):
        assert parse_args(argv).prometheus_web_config == Path("w.yml"), argv
    flagfile = tmp_path / "dynolog.gflags"
    flagfile.write_text("--web.config.file=/etc/dynolog/web-config.yml\n")
    assert parse_args(["--flagfile", str(flagfile)]).prometheus_web_config == Path(
        "/etc/dynolog/web-config.yml"
    )


def test_an_empty_file_is_valid_and_protects_nothing(tmp_path: Path) -> None:
    web = load(web_config(tmp_path, ""))
    assert web.tls is None and not web.users and not web.protects


def test_user_names_yaml_reads_as_other_types_are_refused(tmp_path: Path) -> None:
    with pytest.raises(WebConfigError, match="True is not a user name"):
        load(web_config(tmp_path, f"basic_auth_users:\n  yes: {HASH}\n"))


def test_a_verified_password_is_not_run_through_bcrypt_again() -> None:
    auth = web_server.BasicAuth(lambda environ, start: [b""], {USER: HASH.encode()})
    calls: List[bytes] = []
    checkpw = auth._checkpw
    auth._checkpw = lambda password, hashed: calls.append(password) or checkpw(password, hashed)
    header = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert all(auth.allowed(header) for _ in range(5)) and len(calls) == 1
    wrong = "Basic " + base64.b64encode(f"{USER}:wrong".encode()).decode()
    assert not auth.allowed(wrong) and not auth.allowed(wrong) and len(calls) == 3  # never cached
    for malformed in ("", "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"no colon").decode()):
        assert not auth.allowed(malformed), malformed
    too_long = "Basic " + base64.b64encode(f"{USER}:{'x' * 100}".encode()).decode()
    assert not auth.allowed(too_long)  # bcrypt 5 raises on more than 72 bytes: a refusal, not a 500


def test_a_user_given_twice_is_refused_not_the_last_taken(tmp_path: Path) -> None:
    with pytest.raises(WebConfigError, match=f"line 3: '{USER}' is given twice"):
        load(web_config(tmp_path, f"basic_auth_users:\n  {USER}: {HASH}\n  {USER}: {HASH}\n"))


def test_the_documented_web_config_is_one_the_daemon_takes(pki: Pki, tmp_path: Path) -> None:
    """docs/monitoring.md's example, with this test's certificates under the names it gives."""
    doc = (REPO / "docs" / "monitoring.md").read_text()
    example = "# " + doc.split("```yaml\n# /etc/dynolog/web-config.yml", 1)[1].split("```", 1)[0]
    for name, source in (
        ("exporter.crt", pki.cert("server")),
        ("exporter.key", pki.key("server")),
        ("scrapers-ca.crt", pki.ca),
    ):
        (tmp_path / name).write_bytes(source.read_bytes())
    web = load(web_config(tmp_path, example))
    assert web.tls is not None and web.tls.verify_mode == ssl.CERT_REQUIRED
    assert list(web.users) == ["prometheus"]


# --- What one local user can hold of the exporter, and for how long (review of issue 34 item 9) ---------


class Slowloris:
    """*count* connections to *port*, each sending *opening* at once and then a byte every *pace*
    seconds, never ending its request: when (seconds after it connected) the exporter closed each, and
    what it answered."""

    def __init__(self, port: int, count: int, opening: bytes, pace: float = 0.5) -> None:
        self.pace = pace
        self.opened: Dict[socket.socket, float] = {}
        self.closed: Dict[socket.socket, float] = {}
        self.answers: Dict[socket.socket, bytes] = {}
        self._stop = threading.Event()
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(opening)
            self.opened[sock] = time.monotonic()
        self._thread = threading.Thread(target=self._trickle, daemon=True)
        self._thread.start()

    def _trickle(self) -> None:
        with selectors.DefaultSelector() as selector:
            for sock in self.opened:
                selector.register(sock, selectors.EVENT_READ)
            while not self._stop.is_set() and len(self.closed) < len(self.opened):
                for key, _ in selector.select(self.pace):  # the trickle's pace; the closes as they come
                    self._read(key.fileobj, selector)  # type: ignore[arg-type]
                for sock in self.opened.keys() - self.closed.keys():
                    with contextlib.suppress(OSError):  # closed meanwhile: read as such next turn
                        sock.send(b"a")

    def _read(self, sock: socket.socket, selector: selectors.BaseSelector) -> None:
        try:
            data = sock.recv(4096)
        except OSError:
            data = b""
        if data:
            self.answers[sock] = self.answers.get(sock, b"") + data
            return
        self.closed[sock] = time.monotonic() - self.opened[sock]
        selector.unregister(sock)

    def all_closed(self) -> bool:
        return len(self.closed) == len(self.opened)

    def status(self, sock: socket.socket) -> str:
        """The HTTP status the exporter answered on *sock*; "" for none (TLS, or closed unanswered)."""
        words = self.answers.get(sock, b"").split(b" ", 2)
        return words[1].decode() if len(words) > 1 else ""

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in self.opened:
            sock.close()


def open_sockets(pid: int) -> int:
    """The sockets process *pid* holds open."""
    return sum(1 for fd in Path(f"/proc/{pid}/fd").iterdir() if os.readlink(fd).startswith("socket:"))


@dataclass
class Target:
    """An exporter to attack: its daemon's pid and its port, how each request of the attack begins, and
    a real scrape."""

    pid: int
    port: int
    opening: bytes
    scrape: Callable[[], List[str]]


def test_a_slowloris_holds_few_connections_and_none_past_the_request_deadline(
    pki: Pki, tmp_path: Path, start_daemon: Callable[..., Daemon]
) -> None:
    """More trickling connections than the exporter serves at once, on plain HTTP (headers a byte at a
    time) and on HTTPS (a TLS handshake a byte at a time): they hold at most MAX_CONNECTIONS of the
    daemon's descriptors, a scrape still gets through at once, and every one of them is closed by the
    request deadline (the oldest earlier, to make room), however the bytes keep coming."""
    cap, deadline, extra = web_server.MAX_CONNECTIONS, web_server.REQUEST_TIMEOUT_S, 8
    http, http_port = exporter_of(
        start_daemon, web_config(tmp_path, f"basic_auth_users:\n  {USER}: {HASH}\n")
    )
    text = tls_config(pki) + f"basic_auth_users:\n  {USER}: {HASH}\n"
    https, https_port = exporter_of(start_daemon, web_config(pki.folder, text))
    assert http.proc is not None and https.proc is not None
    tls = client_tls(pki, "prometheus")
    targets = {
        "http": Target(
            http.proc.pid,
            http_port,
            b"GET /metrics HTTP/1.1\r\nHost: dynolog\r\nX-Slow: ",
            lambda: scrape(f"http://127.0.0.1:{http_port}/metrics", USER, PASSWORD),
        ),
        "https": Target(
            https.proc.pid,
            https_port,
            b"\x16\x03\x01\x40\x00",  # a TLS record of 16 KiB of handshake, to come
            lambda: scrape(f"https://127.0.0.1:{https_port}/metrics", USER, PASSWORD, context=tls),
        ),
    }
    before = {name: open_sockets(target.pid) for name, target in targets.items()}
    attacks: Dict[str, Slowloris] = {}
    try:
        for name, target in targets.items():
            attacks[name] = Slowloris(target.port, cap + extra, target.opening)
        for name, target in targets.items():
            attack = attacks[name]
            # Past the cap, each new connection closed the oldest one still sending its request.
            wait_until(lambda a=attack: len(a.closed) >= extra, timeout=5, what=f"{name}: room made")  # type: ignore[misc]
            held = open_sockets(target.pid) - before[name]
            assert held <= cap + 1, (name, held)  # + 1: the one the accept loop has in hand
            started = time.monotonic()
            assert "msmonitor_records" in target.scrape(), name
            assert time.monotonic() - started < 2.0, (name, time.monotonic() - started)
        for name, attack in attacks.items():
            wait_until(attack.all_closed, timeout=deadline + 5, what=f"{name}: every slow connection closed")
            assert max(attack.closed.values()) < deadline + 2, (name, sorted(attack.closed.values()))
        plain = attacks["http"]
        statuses = [plain.status(sock) for sock in plain.opened]
        assert statuses.count("503") >= extra and set(statuses) == {"503", "408"}, statuses
        late = [plain.closed[sock] for sock in plain.opened if plain.status(sock) == "408"]
        assert len(late) >= cap - 1 and min(late) > deadline - 1, sorted(late)  # the deadline cut them
    finally:
        for attack in attacks.values():
            attack.stop()


def test_a_wrong_password_flood_holds_a_correct_scrape_no_longer_than_the_bcrypt_wait(
    tmp_path: Path, start_daemon: Callable[..., Daemon]
) -> None:
    """Threads sending wrong passwords as fast as they are answered, each bcrypt check ~250 ms (cost
    12): a scraper whose password was verified before is answered without bcrypt at once; one whose
    password was not waits for its turn BCRYPT_WAIT_S at most, then is let in or answered 503 to retry.
    The flood itself gets only 401s and 503s."""
    slow = bcrypt.gensalt(12)
    other, other_password = "grafana", "another password"
    users = {
        USER: bcrypt.hashpw(PASSWORD.encode(), slow),
        other: bcrypt.hashpw(other_password.encode(), slow),
    }
    text = "basic_auth_users:\n" + "".join(f"  {u}: {h.decode()}\n" for u, h in users.items())
    url = f"http://127.0.0.1:{exporter(start_daemon, web_config(tmp_path, text))}/metrics"
    scrape(url, USER, PASSWORD)  # verified once, before the flood

    codes: Dict[object, int] = {}
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            try:
                scrape(url, USER, "wrong")
                code: object = 200
            except urllib.error.HTTPError as exc:
                code = exc.code
            except (OSError, http.client.HTTPException) as exc:  # not answered: counted, and told
                code = type(exc).__name__
            codes[code] = codes.get(code, 0) + 1

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: codes.get(401, 0) >= 4, what="the flood under way")
        for _ in range(5):
            started = time.monotonic()
            assert "msmonitor_records" in scrape(url, USER, PASSWORD)
            assert time.monotonic() - started < web_server.BCRYPT_WAIT_S, time.monotonic() - started
        started = time.monotonic()
        try:
            assert "msmonitor_records" in scrape(url, other, other_password)
        except urllib.error.HTTPError as exc:
            assert exc.code == 503 and exc.headers["Retry-After"] == "1", exc
        # Its turn within BCRYPT_WAIT_S, then its own check (~250 ms); a second for a loaded machine.
        assert time.monotonic() - started < web_server.BCRYPT_WAIT_S + 1.5, time.monotonic() - started
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert set(codes) <= {401, 503} and codes.get(503, 0) > 0, codes


def test_a_proof_in_use_is_kept_and_one_unused_expires() -> None:
    now = [0.0]
    auth = web_server.BasicAuth(lambda environ, start: [b""], {USER: HASH.encode()}, clock=lambda: now[0])
    calls: List[bytes] = []
    checkpw = auth._checkpw
    auth._checkpw = lambda password, hashed: calls.append(password) or checkpw(password, hashed)
    header = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert auth.allowed(header) and len(calls) == 1
    ttl = web_server.VERIFIED_FOR_S
    for use in range(1, 5):  # each a second less than ttl after the last: 4 ttl after the check, no bcrypt
        now[0] = use * (ttl - 1)
        assert auth.allowed(header) and len(calls) == 1, use
    now[0] += ttl  # unused for ttl: bcrypt again
    assert auth.allowed(header) and len(calls) == 2


def test_a_password_check_waits_for_its_turn_no_longer_than_the_bound() -> None:
    auth = web_server.BasicAuth(lambda environ, start: [b"page"], {USER: HASH.encode()})
    environ = {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}
    answers: List[str] = []

    def start_response(status: str, headers: List[Tuple[str, str]]) -> None:
        answers.append(status)

    with auth._bcrypt:  # another request's check, taking its time
        started = time.monotonic()
        body = b"".join(auth(environ, start_response))  # type: ignore[arg-type]
        waited = time.monotonic() - started
    assert answers == ["503 Service Unavailable"] and b"retry" in body, (answers, body)
    assert web_server.BCRYPT_WAIT_S - 0.05 < waited < web_server.BCRYPT_WAIT_S + 0.5, waited
    assert b"".join(auth(environ, start_response)) == b"page"  # its turn free: checked, let in  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "policy, protects",
    [("NoClientCert", False), ("VerifyClientCertIfGiven", False), ("RequireAndVerifyClientCert", True)],
)
def test_tls_without_required_client_certificates_is_said_to_protect_nothing(
    pki: Pki, tmp_path: Path, start_daemon: Callable[..., Daemon], policy: str, protects: bool
) -> None:
    """HTTPS alone keeps nobody out: any local user completes the handshake without a certificate (or
    with none given, under VerifyClientCertIfGiven). The daemon warns, as for a file with nothing in it;
    users, or a required client certificate, protect."""
    folder = tmp_path / "conf"
    folder.mkdir()
    for name in ("server.crt", "server.key", "ca.crt"):
        (folder / name).write_bytes((pki.folder / name).read_bytes())
    ca = "" if policy == "NoClientCert" else "  client_ca_file: ca.crt\n"
    text = (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        f"  client_auth_type: {policy}\n{ca}"
    )
    assert load(web_config(folder, text + f"basic_auth_users:\n  {USER}: {HASH}\n")).protects  # users do
    config = web_config(folder, text)
    assert load(config).protects is protects

    daemon, port = exporter_of(start_daemon, config)
    warning = "anyone who can connect reads the exporter"
    if protects:
        assert warning not in daemon.log_file.read_text()
        return
    line = wait_until(
        lambda: next((x for x in daemon.log_file.read_text().splitlines() if warning in x), None),
        what="the warning",
    )
    assert str(config) in line and "RequireAndVerifyClientCert" in line, line
    families = scrape(f"https://127.0.0.1:{port}/metrics", context=client_tls(pki, None))  # what it warns of
    assert "msmonitor_records" in families, families
