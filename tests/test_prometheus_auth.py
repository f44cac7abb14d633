"""The Prometheus exporter under ``--prometheus-web-config`` (exporter-toolkit's web configuration),
against the real daemon: the attack of issue 34 item 9, any local user reading the exporter, is refused
(401 without a user's password; no TLS handshake without a trusted client certificate), while a
scraper with the credentials reads a page prometheus_client's own parser takes. A bad file stops the
start with a line naming the file and the problem."""

from __future__ import annotations

import base64
import http.client
import os
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

import bcrypt
import pytest
from prometheus_client.parser import text_string_to_metric_families

import certs_factory as cf
from dynocerts.policy import Role
from dynolog.config import parse_args
from dynolog.monitoring.sinks import web_server
from dynolog.monitoring.sinks.web_config import EXTRA, WebConfigError, load
from harness import REPO, Daemon, free_port

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


def exporter(start_daemon: Callable[..., Daemon], config: Path) -> int:
    """A real daemon serving Prometheus under *config*; its exporter's port."""
    port = free_port()
    start_daemon("--prometheus-port", str(port), "--prometheus-web-config", str(config))
    return port


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
