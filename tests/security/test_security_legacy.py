"""msMonitor's JSON RPC inside mutual TLS, on the daemon's one port: the same certificates, roles,
revocation and refusals as gRPC, and ``dyno certs init`` material that msMonitor's client takes."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import pytest
from cryptography import x509

import certs_factory as cf
import legacy_cli as cli
from conftest import Authority, Dirs, credentials, status
from harness import Daemon, dyno, wait_until


def context(client: cf.CertsDir) -> ssl.SSLContext:
    return cli.client_context(str(client.ca), str(client.cert), str(client.key))


def ask(daemon: Daemon, body: bytes, client: cf.CertsDir) -> Dict[str, Any]:
    reply = cli.send(daemon.port, body, context(client))
    assert reply is not None, "the daemon closed without answering"
    return json.loads(reply)  # type: ignore[no-any-return]


def test_legacy_and_grpc_share_the_port_and_the_certificates(
    tls_daemon: Daemon, dirs: Dirs, authority: Authority
) -> None:
    assert ask(tls_daemon, cli.STATUS, dirs.alice)["status"] == 1
    assert status(tls_daemon, credentials(authority.ca, authority.alice)).tls  # gRPC (ALPN h2), same port


def test_plaintext_legacy_is_refused_once_logged(tls_daemon: Daemon) -> None:
    for _ in range(3):
        assert cli.send(tls_daemon.port, cli.STATUS) is None
    log = tls_daemon.log_file.read_text()
    assert log.count("refused a plaintext legacy JSON RPC connection from 127.0.0.1") == 1


def test_a_client_without_a_certificate_or_from_another_ca_gets_nothing(
    tls_daemon: Daemon, dirs: Dirs, other_authority: Authority, tmp_path: Path
) -> None:
    anonymous = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    anonymous.load_verify_locations(str(dirs.alice.ca))
    assert _refused(tls_daemon, anonymous)
    stranger = cf.certs_dir(tmp_path / "eve", dirs.alice.role, other_authority.ca, other_authority.bob)
    mixed = cli.client_context(str(dirs.alice.ca), str(stranger.cert), str(stranger.key))
    assert _refused(tls_daemon, mixed)
    assert ask(tls_daemon, cli.STATUS, dirs.bob)["status"] == 1  # others go on being served


def _refused(daemon: Daemon, context: ssl.SSLContext) -> bool:
    try:
        return cli.send(daemon.port, cli.STATUS, context) is None
    except (ssl.SSLError, ConnectionError):
        return True  # TLS 1.3 reports the refused certificate at the first read, 1.2 at the handshake


def test_a_read_only_client_may_read_but_not_trace(start_daemon: Callable[..., Daemon], dirs: Dirs) -> None:
    daemon = start_daemon("--certs-dir", str(dirs.server), "--read-only-clients", "bob")
    assert ask(daemon, cli.STATUS, dirs.bob)["status"] == 1
    refused = ask(daemon, cli.set_config(cli.msmonitor_nputrace("/tmp", 10, 1)), dirs.bob)
    assert refused["commandStatus"] == "ineffective" and refused["processesMatched"] == []
    assert "client 'bob' is read-only on this daemon" in refused["message"]
    operator = ask(daemon, cli.set_config(cli.msmonitor_nputrace("/tmp", 10, 1)), dirs.alice)
    assert "no process is registered" in operator["message"]  # past authorization, into the pipeline
    cancel = cli.cancel_trace("123")
    assert "/dynolog.v1.Dynolog/CancelTrace needs an operator" in ask(daemon, cancel, dirs.bob)["message"]
    assert ask(daemon, cancel, dirs.alice)["message"] == "no trace '123' on this daemon"


def test_a_revoked_client_is_refused_at_its_next_request(
    start_daemon: Callable[..., Daemon], dirs: Dirs, authority: Authority
) -> None:
    daemon = start_daemon("--certs-dir", str(dirs.server))
    assert ask(daemon, cli.STATUS, dirs.alice)["status"] == 1
    cf.write(dirs.server.crl, cf.revocation_list(authority.ca, [authority.alice.cert]))
    assert "revoked on" in ask(daemon, cli.STATUS, dirs.alice)["message"]
    assert ask(daemon, cli.STATUS, dirs.bob)["status"] == 1


def test_dyno_certs_init_material_passes_msmonitors_client_checks(
    tmp_path: Path, start_daemon: Callable[..., Daemon]
) -> None:
    init = ["certs", "init", str(tmp_path / "pki"), "--server-hosts", "localhost", "--client-name", "alice"]
    made = dyno(*init, timeout=120)
    assert made.returncode == 0, made.stderr
    client_dir = tmp_path / "pki" / "client"
    # msMonitor's dyno reads a PKCS#8 key and checks ca.crt: v3, CA:TRUE, keyCertSign and cRLSign.
    assert (client_dir / "client.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
    ca = x509.load_pem_x509_certificate((client_dir / "ca.crt").read_bytes())
    assert ca.version is x509.Version.v3
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    own = x509.load_pem_x509_certificate((client_dir / "client.crt").read_bytes())
    assert not own.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert own.extensions.get_extension_for_class(x509.KeyUsage)
    daemon = start_daemon("--certs-dir", str(tmp_path / "pki" / "server"))
    tls = cli.client_context(
        str(client_dir / "ca.crt"), str(client_dir / "client.crt"), str(client_dir / "client.key")
    )
    reply: Optional[bytes] = cli.send(daemon.port, cli.STATUS, tls)
    assert reply is not None and json.loads(reply)["status"] == 1


@pytest.mark.torch
def test_msmonitor_nputrace_and_npu_monitor_in_tls_reach_a_plugin_job(
    tls_daemon: Daemon, dirs: Dirs, start_workload: Any, tmp_path: Path
) -> None:
    job = start_workload("train.py", tls_daemon.plugin_env(RANK="0"))
    wait_until(
        lambda: ask(tls_daemon, cli.STATUS, dirs.alice)["npumonitor"] == "Idle", what="the job to register"
    )
    traced = ask(tls_daemon, cli.set_config(cli.msmonitor_nputrace(str(tmp_path), -1, 2)), dirs.alice)
    assert traced["commandStatus"] == "effective" and traced["processesMatched"] == [job.pid], traced
    wait_until(lambda: list(tmp_path.glob("*/*.pt.trace.json")), what="the trace's file")
    wait_until(lambda: ask(tls_daemon, cli.STATUS, dirs.alice)["nputrace"] == "Idle", what="the trace to end")
    started = ask(tls_daemon, cli.set_config(cli.msmonitor_npu_monitor(True, interval_s=1)), dirs.alice)
    assert started["commandStatus"] == "effective" and started["processesMatched"] == [job.pid], started
    wait_until(lambda: ask(tls_daemon, cli.STATUS, dirs.alice)["npumonitor"] == "Running", what="the monitor")
    stopped = ask(tls_daemon, cli.set_config(cli.msmonitor_npu_monitor(False, True)), dirs.alice)
    assert stopped["commandStatus"] == "effective", stopped
