"""Mutual TLS between real `dyno` / gRPC clients and a real `dynolog` process: every way it must fail,
with the exact words the user reads, and the daemon going on serving the clients it should."""

from __future__ import annotations

import socket
import ssl
import subprocess
from pathlib import Path
from typing import Callable

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import certs_factory as cf
from conftest import Authority, Dirs, FailedStart, call_fails, credentials, status
from dynocerts.keys import pkcs8_pem
from dynocerts.make import Issued
from dynocerts.policy import Role, when
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon

Proc = subprocess.CompletedProcess


def refused_client_cert(d: Daemon, certs: object) -> str:
    return (
        f"dyno: cannot reach dynolog at localhost:{d.port}: the daemon closed the connection during the TLS "
        f"handshake: it refused our client certificate {certs}/client.crt\n"
        "Check that it was issued by the CA in the daemon's ca.crt (`dyno certs check` on both directories) "
        "and that the daemon's clock is right.\n"
    )


def assert_exit(result: Proc, code: int, stderr: str) -> None:
    assert (result.returncode, result.stderr) == (code, stderr), result.stdout


# --- the good path ----------------------------------------------------------------------------


def test_mutual_tls_status(tls_daemon: Daemon, dirs: Dirs) -> None:
    reply = tls_daemon.dyno_json("--certs-dir", str(dirs.alice), "status")
    assert reply["tls"] is True
    text = tls_daemon.dyno("--certs-dir", str(dirs.alice), "status", expect=0).stdout
    assert f"transport:  mutual TLS at localhost:{tls_daemon.port}" in text


def test_ip_address_san(tls_daemon: Daemon, dirs: Dirs) -> None:
    result = tls_daemon.dyno("--hostname", "127.0.0.1", "--certs-dir", str(dirs.alice), "version", expect=0)
    assert result.stdout.startswith("dynolog ")


def handshake(
    d: Daemon, authority: Authority, bundle: Path, version: ssl.TLSVersion, ciphers: str = "DEFAULT"
) -> str:
    """A raw TLS handshake with alice's certificate: the negotiated version and suite, or the error."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.set_ciphers(f"{ciphers}:@SECLEVEL=0")  # let this client offer what the daemon must refuse
    ctx.minimum_version = ctx.maximum_version = version
    ctx.load_verify_locations(cadata=cf.pem(authority.ca.cert).decode())
    ctx.load_cert_chain(bundle)
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                return f"{tls.version()} {tls.cipher()[0]}"  # type: ignore[index]
        except ssl.SSLError as exc:
            return exc.reason or str(exc)


@pytest.fixture
def alice_bundle(tmp_path: Path, authority: Authority) -> Path:
    return cf.write(tmp_path / "alice.pem", cf.pem(authority.alice.cert) + pkcs8_pem(authority.alice.key))


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_1_1_is_refused_1_2_and_1_3_accepted(
    tls_daemon: Daemon, authority: Authority, alice_bundle: Path
) -> None:
    # The client sent its TLS 1.1 hello (it did not fail with NO_PROTOCOLS_AVAILABLE); the daemon hung up.
    assert (
        handshake(tls_daemon, authority, alice_bundle, ssl.TLSVersion.TLSv1_1)
        == "UNEXPECTED_EOF_WHILE_READING"
    )
    assert handshake(tls_daemon, authority, alice_bundle, ssl.TLSVersion.TLSv1_2).startswith("TLSv1.2 ECDHE-")
    assert handshake(tls_daemon, authority, alice_bundle, ssl.TLSVersion.TLSv1_3).startswith("TLSv1.3 TLS_")


def test_tls_1_2_suites(tls_daemon: Daemon, authority: Authority, alice_bundle: Path) -> None:
    v12 = ssl.TLSVersion.TLSv1_2
    gcm = "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert handshake(tls_daemon, authority, alice_bundle, v12, gcm) == f"TLSv1.2 {gcm}"
    assert (
        handshake(tls_daemon, authority, alice_bundle, v12, "ECDHE-ECDSA-AES128-SHA")
        == "UNEXPECTED_EOF_WHILE_READING"
    )


# --- the client side: what dyno refuses before connecting ------------------------------------


def test_client_without_a_certificate(tls_daemon: Daemon, dirs: Dirs) -> None:
    dirs.alice.cert.unlink()
    dirs.alice.key.unlink()
    assert_exit(
        tls_daemon.dyno("--certs-dir", str(dirs.alice), "status"),
        2,
        f"dyno: cannot use --certs-dir {dirs.alice}:\n"
        f"  {dirs.alice}/client.crt: file: missing; needs the client certificate (PEM)\n"
        f"  {dirs.alice}/client.key: file: No such file or directory; needs the private key (PEM)\n",
    )


def test_daemon_refuses_a_tls_client_without_a_certificate(tls_daemon: Daemon, authority: Authority) -> None:
    err = call_fails(tls_daemon, credentials(authority.ca, None))
    assert err.code() is grpc.StatusCode.UNAVAILABLE
    assert status(tls_daemon, credentials(authority.ca, authority.bob)).tls  # still serving others


def test_client_certificate_from_another_ca(
    tls_daemon: Daemon, tmp_path: Path, authority: Authority, other_authority: Authority
) -> None:
    # Trusts the daemon's CA, but presents a certificate the daemon's CA never issued.
    eve = cf.certs_dir(
        tmp_path / "eve", Role.CLIENT, other_authority.ca, other_authority.alice, trust=authority.ca
    )
    # dyno checks its own directory first...
    assert_exit(
        tls_daemon.dyno("--certs-dir", str(eve), "status"),
        2,
        f"dyno: cannot use --certs-dir {eve}:\n"
        f"  {eve.cert}: issuer: signed by 'CN=Other CA', not by the CA in {eve.ca}; needs a certificate "
        "issued "
        f"by the CA in {eve.ca}\n",
    )
    # ...and a directory that is self-consistent but from another CA is refused by the daemon.
    other = cf.certs_dir(tmp_path / "other", Role.CLIENT, other_authority.ca, other_authority.alice)
    cf.write(other.ca, cf.pem(other_authority.ca.cert) + cf.pem(authority.ca.cert))  # trusts both
    assert_exit(
        tls_daemon.dyno("--certs-dir", str(other), "status"), 3, refused_client_cert(tls_daemon, other)
    )


def test_server_certificate_from_another_ca(
    tls_daemon: Daemon, tmp_path: Path, other_authority: Authority
) -> None:
    other = cf.certs_dir(tmp_path / "other", Role.CLIENT, other_authority.ca, other_authority.alice)
    assert_exit(
        tls_daemon.dyno("--certs-dir", str(other), "status"),
        3,
        f"dyno: cannot reach dynolog at localhost:{tls_daemon.port}: the daemon's certificate is not trusted "
        "(unable to get local issuer certificate)\n"
        f"Check that {other}/ca.crt is the CA that issued the daemon's server.crt, and that the daemon's "
        "certificate is within its validity.\n",
    )


@pytest.mark.parametrize("window", ["expired", "not yet valid"])
def test_client_certificate_outside_its_validity(
    tls_daemon: Daemon, tmp_path: Path, authority: Authority, window: str
) -> None:
    start = cf.now() + 2 * cf.DAY if window == "not yet valid" else cf.now() - 10 * cf.DAY
    cert = cf.leaf(authority.ca, Role.CLIENT, "alice", not_before=start, not_after=start + cf.DAY)
    d = cf.certs_dir(tmp_path / "c", Role.CLIENT, authority.ca, cert)
    problem = f"not valid before {when(start)}; needs a certificate valid now (check clocks)"
    if window == "expired":
        problem = f"expired on {when(start + cf.DAY)}; needs a renewed certificate"
    assert_exit(
        tls_daemon.dyno("--certs-dir", str(d), "status"),
        2,
        f"dyno: cannot use --certs-dir {d}:\n  {d.cert}: validity: {problem}\n",
    )
    # A client that does not check itself is refused by the daemon's handshake all the same.
    assert call_fails(tls_daemon, credentials(authority.ca, cert)).code() is grpc.StatusCode.UNAVAILABLE


def test_client_rsa_2048(tls_daemon: Daemon, tmp_path: Path, authority: Authority) -> None:
    weak = cf.leaf(authority.ca, Role.CLIENT, "alice", private_key=cf.key("rsa2048"))
    d = cf.certs_dir(tmp_path / "c", Role.CLIENT, authority.ca, weak)
    assert_exit(
        tls_daemon.dyno("--certs-dir", str(d), "status"),
        2,
        f"dyno: cannot use --certs-dir {d}:\n"
        f"  {d.cert}: public key: RSA 2048 bits; needs RSA >= 3072 bits or ECDSA P-256/P-384\n",
    )


def test_wrong_hostname(
    start_daemon: Callable[..., Daemon], tmp_path: Path, authority: Authority, dirs: Dirs
) -> None:
    named = cf.leaf(authority.ca, Role.SERVER, "node01", hosts=["node01.cluster.lan"])
    server = cf.certs_dir(tmp_path / "named", Role.SERVER, authority.ca, named)
    d = start_daemon("--certs-dir", str(server))
    assert_exit(
        d.dyno("--certs-dir", str(dirs.alice), "status"),
        3,
        f"dyno: cannot reach dynolog at localhost:{d.port}: the daemon's certificate does not name "
        "'localhost' "
        "(TLS hostname check)\n"
        "Give as --hostname a name in the daemon's server.crt subjectAltName (`dyno certs check` on the "
        "daemon's --certs-dir lists them), or issue it one with that name (dyno certs issue).\n",
    )
    # The daemon said so at start: its certificate names none of the names it can be reached by.
    log = d.log_file.read_text()
    assert (
        f"WARNING dynolog.tls: warning: {server.cert}: subjectAltName: names DNS:node01.cluster.lan, none of"
        in log
    )


def test_plaintext_client_against_tls_daemon(tls_daemon: Daemon) -> None:
    assert_exit(
        tls_daemon.dyno("status"),
        3,
        f"dyno: cannot reach dynolog at localhost:{tls_daemon.port}: the daemon closed the connection: it "
        "probably "
        "requires mutual TLS\n"
        "Give --certs-dir DIR (with ca.crt, client.crt, client.key) when the daemon has --certs-dir.\n",
    )


def test_tls_client_against_plaintext_daemon(daemon: Daemon, dirs: Dirs) -> None:
    assert_exit(
        daemon.dyno("--certs-dir", str(dirs.alice), "status"),
        3,
        f"dyno: cannot reach dynolog at localhost:{daemon.port}: the daemon does not speak TLS (it runs with "
        "--certs-dir NO_CERTS or without --certs-dir)\n"
        "Use the same --certs-dir mode on both sides.\n",
    )


# --- keys -----------------------------------------------------------------------------------------


def test_client_key_with_password_file(tls_daemon: Daemon, tmp_path: Path, authority: Authority) -> None:
    d = cf.certs_dir(tmp_path / "c", Role.CLIENT, authority.ca, authority.alice, password=b"pw one")
    pw = cf.write(tmp_path / "pw", b"pw one\n")
    reply = tls_daemon.dyno(
        "--certs-dir", str(d), "--key-password-file", str(pw), "--json", "status", expect=0
    )
    assert '"tls": true' in reply.stdout


def test_client_key_with_password_from_env(
    tls_daemon: Daemon, tmp_path: Path, authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = cf.certs_dir(
        tmp_path / "c", Role.CLIENT, authority.ca, authority.alice, password=b"pw two", pkcs1=True
    )
    assert b"Proc-Type: 4,ENCRYPTED" in d.key.read_bytes()
    monkeypatch.setenv("DYNO_KEY_PASSWORD", "pw two")
    tls_daemon.dyno("--certs-dir", str(d), "status", expect=0)


def test_client_key_with_wrong_password(
    tls_daemon: Daemon, tmp_path: Path, authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = cf.certs_dir(tmp_path / "c", Role.CLIENT, authority.ca, authority.alice, password=b"right")
    monkeypatch.setenv("DYNO_KEY_PASSWORD", "wrong")
    assert_exit(
        tls_daemon.dyno("--certs-dir", str(d), "status"),
        2,
        f"dyno: cannot use --certs-dir {d}:\n"
        f"  {d.key}: private key: cannot be decrypted with the password from $DYNO_KEY_PASSWORD; needs the "
        "password it was encrypted with\n",
    )


def test_client_key_readable_by_others(tls_daemon: Daemon, tmp_path: Path, authority: Authority) -> None:
    d = cf.certs_dir(tmp_path / "c", Role.CLIENT, authority.ca, authority.alice, key_mode=0o644)
    assert_exit(
        tls_daemon.dyno("--certs-dir", str(d), "status"),
        2,
        f"dyno: cannot use --certs-dir {d}:\n"
        f"  {d.key}: permissions: 0644 lets group/others read the private key; run: chmod 600 {d.key}\n",
    )


# --- the daemon refuses to start ------------------------------------------------------------------


def startup_errors(result: Proc) -> list[str]:
    assert result.returncode == 1
    return [line.removeprefix("dynolog: ") for line in result.stderr.splitlines()]


def server_dir(tmp_path: Path, authority: Authority, cert: Issued, **kwargs: object) -> cf.CertsDir:
    return cf.certs_dir(tmp_path / "bad-server", Role.SERVER, authority.ca, cert, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("window", ["expired", "not yet valid"])
def test_daemon_certificate_outside_its_validity(
    failed_start: FailedStart, tmp_path: Path, authority: Authority, window: str
) -> None:
    start = cf.now() + 2 * cf.DAY if window == "not yet valid" else cf.now() - 10 * cf.DAY
    d = server_dir(
        tmp_path,
        authority,
        cf.leaf(authority.ca, Role.SERVER, "localhost", not_before=start, not_after=start + cf.DAY),
    )
    problem = f"not valid before {when(start)}; needs a certificate valid now (check clocks)"
    if window == "expired":
        problem = f"expired on {when(start + cf.DAY)}; needs a renewed certificate"
    assert startup_errors(failed_start("--certs-dir", str(d))) == [f"{d.cert}: validity: {problem}"]


def test_daemon_rsa_2048(failed_start: FailedStart, tmp_path: Path, authority: Authority) -> None:
    d = server_dir(
        tmp_path, authority, cf.leaf(authority.ca, Role.SERVER, "localhost", private_key=cf.key("rsa2048"))
    )
    assert startup_errors(failed_start("--certs-dir", str(d))) == [
        f"{d.cert}: public key: RSA 2048 bits; needs RSA >= 3072 bits or ECDSA P-256/P-384"
    ]


def test_daemon_sha1_signature(failed_start: FailedStart, tmp_path: Path, rsa_authority: Issued) -> None:
    good = cf.leaf(rsa_authority, Role.SERVER, "localhost")
    sha1 = Issued(cf.with_sha1_signature(good.cert, rsa_authority.key), good.key)  # type: ignore[arg-type]
    d = cf.certs_dir(tmp_path / "s", Role.SERVER, rsa_authority, sha1)
    assert startup_errors(failed_start("--certs-dir", str(d))) == [
        f"{d.cert}: signature algorithm: sha1WithRSAEncryption; needs RSA or ECDSA with SHA-256, SHA-384 or "
        "SHA-512"
    ]


def test_daemon_certificate_without_san(
    failed_start: FailedStart, tmp_path: Path, authority: Authority
) -> None:
    d = server_dir(tmp_path, authority, cf.leaf(authority.ca, Role.SERVER, "localhost", hosts=()))
    assert startup_errors(failed_start("--certs-dir", str(d))) == [
        f"{d.cert}: subjectAltName: missing; needs the DNS names and IP addresses clients give as --hostname "
        "(dyno certs init --server-hosts)"
    ]


def test_daemon_with_a_client_certificate(
    failed_start: FailedStart, tmp_path: Path, authority: Authority
) -> None:
    d = server_dir(tmp_path, authority, authority.alice)
    assert startup_errors(failed_start("--certs-dir", str(d))) == [
        f"{d.cert}: extendedKeyUsage: has clientAuth; needs extendedKeyUsage serverAuth for a server "
        "certificate",
        f"{d.cert}: subjectAltName: missing; needs the DNS names and IP addresses clients give as --hostname "
        "(dyno certs init --server-hosts)",
    ]


def test_daemon_key_readable_by_others(
    failed_start: FailedStart, tmp_path: Path, authority: Authority
) -> None:
    d = server_dir(tmp_path, authority, authority.server, key_mode=0o604)
    assert startup_errors(failed_start("--certs-dir", str(d))) == [
        f"{d.key}: permissions: 0604 lets group/others read the private key; run: chmod 600 {d.key}"
    ]


def test_daemon_key_with_password_file(
    start_daemon: Callable[..., Daemon], tmp_path: Path, authority: Authority, dirs: Dirs
) -> None:
    d = server_dir(tmp_path, authority, authority.server, password=b"daemon pw")
    pw = cf.write(tmp_path / "pw", b"daemon pw\n")
    daemon = start_daemon("--certs-dir", str(d), "--key-password-file", str(pw))
    daemon.dyno("--certs-dir", str(dirs.alice), "status", expect=0)


def test_daemon_key_with_password_from_env(
    start_daemon: Callable[..., Daemon], tmp_path: Path, authority: Authority, dirs: Dirs
) -> None:
    d = server_dir(tmp_path, authority, authority.server, password=b"env pw", pkcs1=True)
    daemon = start_daemon("--certs-dir", str(d), env={"DYNOLOG_KEY_PASSWORD": "env pw"})
    daemon.dyno("--certs-dir", str(dirs.alice), "status", expect=0)


def test_daemon_key_with_wrong_password(
    failed_start: FailedStart, tmp_path: Path, authority: Authority
) -> None:
    d = server_dir(tmp_path, authority, authority.server, password=b"right")
    pw = cf.write(tmp_path / "pw", b"wrong")
    assert startup_errors(failed_start("--certs-dir", str(d), "--key-password-file", str(pw))) == [
        f"{d.key}: private key: cannot be decrypted with the password from --key-password-file {pw}; needs "
        "the "
        "password it was encrypted with"
    ]


def test_daemon_key_without_password(failed_start: FailedStart, tmp_path: Path, authority: Authority) -> None:
    d = server_dir(tmp_path, authority, authority.server, password=b"pw")
    assert startup_errors(failed_start("--certs-dir", str(d), env={"DYNOLOG_KEY_PASSWORD": ""})) == [
        f"{d.key}: private key: encrypted, and no password was given; needs --key-password-file FILE or "
        "$DYNOLOG_KEY_PASSWORD (or a terminal to be asked on)"
    ]


def test_daemon_plaintext_beyond_loopback_needs_no_certs(failed_start: FailedStart) -> None:
    assert startup_errors(failed_start("--listen-address", "0.0.0.0")) == [
        "refusing to serve plaintext gRPC on 0.0.0.0 without certificates: give --certs-dir DIR for mutual "
        "TLS, "
        "or --certs-dir NO_CERTS to accept plaintext"
    ]


# --- revocation -----------------------------------------------------------------------------------


def test_daemon_refuses_to_start_with_its_own_certificate_revoked(
    failed_start: FailedStart, dirs: Dirs, authority: Authority
) -> None:
    cf.write(dirs.server.crl, cf.revocation_list(authority.ca, [authority.server.cert]))
    [line] = startup_errors(failed_start("--certs-dir", str(dirs.server)))
    assert line.startswith(
        f"{dirs.server.cert}: serial: {authority.server.cert.serial_number:X} was revoked on "
    )
    assert line.endswith(f"(listed in {dirs.server.crl}); needs a new certificate (dyno certs issue)")


def test_daemon_refuses_an_expired_crl(failed_start: FailedStart, dirs: Dirs, authority: Authority) -> None:
    issued = cf.now() - 3 * cf.DAY
    cf.write(dirs.server.crl, cf.revocation_list(authority.ca, lifetime=cf.DAY, last_update=issued))
    assert startup_errors(failed_start("--certs-dir", str(dirs.server))) == [
        f"{dirs.server.crl}: nextUpdate: expired on {when(issued + cf.DAY)}; needs a fresh CRL from the CA "
        "(dyno certs crl)"
    ]


def test_revoked_client_is_refused_while_others_are_served(
    tls_daemon: Daemon, dirs: Dirs, authority: Authority
) -> None:
    alice = ("--certs-dir", str(dirs.alice), "status")
    tls_daemon.dyno(*alice, expect=0)  # connected before the revocation...
    cf.write(dirs.server.crl, cf.revocation_list(authority.ca, [authority.alice.cert]))
    # ...refused after it, without restarting the daemon.
    serial = f"{authority.alice.cert.serial_number:X}"
    result = tls_daemon.dyno(*alice)
    assert result.returncode == 3
    first, second = result.stderr.splitlines()
    assert first.startswith(
        f"dyno: dynolog at localhost:{tls_daemon.port} refused this client: client certificate 'alice' "
        f"(serial {serial}): revoked on "
    )
    assert first.endswith("(listed in the daemon's ca.crl)")
    assert second == "Ask whoever runs the CA for a new client certificate."
    tls_daemon.dyno("--certs-dir", str(dirs.bob), "status", expect=0)
    # A long-lived connection is refused too: the check runs on every call, not once per handshake.
    with grpc.secure_channel(
        f"localhost:{tls_daemon.port}", credentials(authority.ca, authority.alice)
    ) as ch, pytest.raises(grpc.RpcError) as err:
        pb_grpc.DynologStub(ch).GetVersion(pb.GetVersionRequest(), timeout=10)
    assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "refused" in tls_daemon.log_file.read_text()


def test_revocation_checked_on_an_open_connection(
    tls_daemon: Daemon, dirs: Dirs, authority: Authority
) -> None:
    with grpc.secure_channel(
        f"localhost:{tls_daemon.port}", credentials(authority.ca, authority.alice)
    ) as ch:
        stub = pb_grpc.DynologStub(ch)
        stub.GetVersion(pb.GetVersionRequest(), timeout=10)
        cf.write(dirs.server.crl, cf.revocation_list(authority.ca, [authority.alice.cert]))
        with pytest.raises(grpc.RpcError) as err:
            stub.GetVersion(pb.GetVersionRequest(), timeout=10)
    assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_unusable_crl_at_runtime_fails_closed(
    tls_daemon: Daemon, dirs: Dirs, authority: Authority, other_authority: Authority
) -> None:
    cf.write(dirs.server.crl, cf.revocation_list(other_authority.ca))
    err = call_fails(tls_daemon, credentials(authority.ca, authority.bob))
    assert err.code() is grpc.StatusCode.UNAUTHENTICATED
    assert err.details() == (
        f"client certificate 'bob' (serial {authority.bob.cert.serial_number:X}): the daemon cannot check "
        f"revocation ({dirs.server.crl}: signature: not signed by the CA in {dirs.server.ca} (issuer "
        "'CN=Other "
        f"CA'); needs a CRL issued by the CA in {dirs.server.ca}); every client is refused until it is fixed"
    )
    cf.write(dirs.server.crl, cf.revocation_list(authority.ca))
    assert status(tls_daemon, credentials(authority.ca, authority.bob)).tls


# --- authorization --------------------------------------------------------------------------------


def trace_request(log_file: str) -> pb.NpuTraceRequest:
    return pb.NpuTraceRequest(log_file=log_file, start_step=-1, iterations=1, activities=["CPU"])


def unary(d: Daemon, who: Issued, authority: Authority, method: str) -> grpc.RpcError:
    with grpc.secure_channel(f"localhost:{d.port}", credentials(authority.ca, who)) as ch:
        call = ch.unary_unary(method, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as err:
            call(b"", timeout=10)
    return err.value


def test_read_only_client_may_read_but_not_trace(
    start_daemon: Callable[..., Daemon], dirs: Dirs, authority: Authority
) -> None:
    d = start_daemon("--certs-dir", str(dirs.server), "--read-only-clients", "ali*")
    d.dyno("--certs-dir", str(dirs.alice), "status", expect=0)
    d.dyno("--certs-dir", str(dirs.alice), "processes", expect=0)
    with grpc.secure_channel(f"localhost:{d.port}", credentials(authority.ca, authority.alice)) as ch:
        health = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    alice = credentials(authority.ca, authority.alice)
    with grpc.secure_channel(f"localhost:{d.port}", alice) as ch, pytest.raises(grpc.RpcError) as err:
        pb_grpc.DynologStub(ch).NpuTrace(trace_request("/tmp/traces"), timeout=10)
    denied = err.value
    assert (denied.code(), denied.details()) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "client 'alice' is read-only on this daemon (--read-only-clients): /dynolog.v1.Dynolog/NpuTrace "
        "needs an "
        "operator (--operator-clients)",
    )
    cancel = d.dyno("--certs-dir", str(dirs.alice), "trace", "123", "--cancel")
    assert cancel.returncode != 0 and "PERMISSION_DENIED" in cancel.stderr, cancel.stderr
    assert "/dynolog.v1.Dynolog/CancelTrace needs an operator" in cancel.stderr
    # bob is an operator (the default): he is authorized and reaches the method itself.
    assert (
        unary(d, authority.bob, authority, "/dynolog.v1.Dynolog/NoSuchMethod").code()
        is grpc.StatusCode.UNIMPLEMENTED
    )


def test_operator_list_refuses_everyone_else(start_daemon: Callable[..., Daemon], dirs: Dirs) -> None:
    d = start_daemon("--certs-dir", str(dirs.server), "--operator-clients", "bob,carol")
    d.dyno("--certs-dir", str(dirs.bob), "status", expect=0)
    assert_exit(
        d.dyno("--certs-dir", str(dirs.alice), "status"),
        1,
        f"dyno: dynolog at localhost:{d.port} answered PERMISSION_DENIED: client 'alice' matches neither "
        "--operator-clients nor --read-only-clients of this daemon: /dynolog.v1.Dynolog/GetStatus refused\n",
    )


def test_reflection_works_for_read_only_clients(
    start_daemon: Callable[..., Daemon], dirs: Dirs, authority: Authority
) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    d = start_daemon("--certs-dir", str(dirs.server), "--read-only-clients", "*")
    with grpc.secure_channel(f"localhost:{d.port}", credentials(authority.ca, authority.alice)) as ch:
        replies = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        )
        services = [s.name for r in replies for s in r.list_services_response.service]
    assert "dynolog.v1.Dynolog" in services


def test_health_watch_stream_is_authorized(
    start_daemon: Callable[..., Daemon], dirs: Dirs, authority: Authority
) -> None:
    d = start_daemon("--certs-dir", str(dirs.server), "--operator-clients", "bob")
    with grpc.secure_channel(f"localhost:{d.port}", credentials(authority.ca, authority.alice)) as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(), timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            next(iter(stream))
    assert err.value.code() is grpc.StatusCode.PERMISSION_DENIED
    with grpc.secure_channel(f"localhost:{d.port}", credentials(authority.ca, authority.bob)) as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(), timeout=10)
        first = next(iter(stream))
        stream.cancel()
    assert first.status == health_pb2.HealthCheckResponse.SERVING


def test_trace_root_confines_output_paths(
    start_daemon: Callable[..., Daemon], dirs: Dirs, authority: Authority, tmp_path: Path
) -> None:
    root = tmp_path / "traces"
    d = start_daemon("--certs-dir", str(dirs.server), "--trace-root", str(root))
    with grpc.secure_channel(f"localhost:{d.port}", credentials(authority.ca, authority.alice)) as ch:
        stub = pb_grpc.DynologStub(ch)
        with pytest.raises(grpc.RpcError) as err:
            stub.NpuTrace(trace_request(f"{root}/../elsewhere"), timeout=10)
        inside = stub.NpuTrace(trace_request(f"{root}/job1"), timeout=10)
    assert (err.value.code(), err.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        f"--log-file '{root}/../elsewhere': outside the --trace-root directories of this daemon ({root})",
    )
    assert inside.command_status == pb.COMMAND_STATUS_INEFFECTIVE  # accepted: no process to trace here
