"""TLS files replaced under a running `dynolog`, as an operator renews them: the daemon serves the new
set to new connections without a restart, keeps open ones going, refuses an unusable set while keeping
the one it has, and follows the CRL against whichever CA it trusts now.

Files are replaced by a rename, as ``dyno certs`` writes them. Nothing sleeps: each test triggers
handshakes (every one makes the daemon look at its files) until it sees what it waits for.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Callable, Optional

import grpc
import pytest
from cryptography import x509

import certs_factory as cf
from conftest import Authority, Dirs, call_fails, credentials, status
from dynocerts.keys import pkcs8_pem
from dynocerts.make import Issued
from dynocerts.pki import write_private
from dynocerts.policy import Role
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, wait_until

Bundle = Callable[[Issued], Path]


@pytest.fixture
def bundle(tmp_path: Path) -> Bundle:
    """A PEM file with a client's certificate and key, for Python's ssl module."""

    def make(client: Issued) -> Path:
        return cf.write(
            tmp_path / f"bundle-{client.cert.serial_number:x}.pem",
            cf.pem(client.cert) + pkcs8_pem(client.key),
        )

    return make


def served_serial(d: Daemon, client: Path) -> Optional[int]:
    """The serial of the certificate a new connection is served (not verified: only which one), or
    None when the handshake fails."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(client)
    ctx.set_alpn_protocols(["h2"])
    try:
        raw = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        with raw, ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            der = tls.getpeercert(binary_form=True)
    except (ssl.SSLError, OSError):
        return None
    return x509.load_der_x509_certificate(der).serial_number if der else None


def install(
    server: cf.CertsDir, own: Issued, ca: Optional[Issued] = None, password: Optional[bytes] = None
) -> None:
    """A new server set, each file replaced by a rename; the daemon may look between two of them."""
    if ca is not None:
        write_private(server.ca, cf.pem(ca.cert))
    write_private(server.key, cf.key_pem(own.key, password))
    write_private(server.cert, cf.pem(own.cert))


def wait_for_serial(d: Daemon, client: Path, serial: int) -> None:
    wait_until(
        lambda: served_serial(d, client) == serial, what=f"new connections to be served serial {serial:X}"
    )


def log_says(d: Daemon, text: str) -> bool:
    return text in d.log_file.read_text()


# The arguments are pytest fixtures: each one a thing the test uses, not options to group.
def test_a_renewed_server_certificate_is_served_to_new_connections_while_a_stream_goes_on(  # noqa: PLR0913
    start_daemon: Callable[..., Daemon],
    start_workload,
    dirs: Dirs,
    authority: Authority,
    bundle: Bundle,
    tmp_path: Path,
) -> None:
    d = start_daemon("--certs-dir", str(dirs.server))
    alice = bundle(authority.alice)
    assert served_serial(d, alice) == authority.server.cert.serial_number
    job = start_workload("idle.py", d.client_env(), "--init")
    with grpc.secure_channel(f"localhost:{d.port}", credentials(authority.ca, authority.alice)) as ch:
        stub = pb_grpc.DynologStub(ch)
        wait_until(
            lambda: (
                job.pid
                in [p.pid for p in stub.ListProcesses(pb.ListProcessesRequest(), timeout=10).processes]
            ),
            what="the job to register",
        )
        # A trace that waits for a step the job never reaches: WatchTrace answers at each change.
        trace = stub.NpuTrace(
            pb.NpuTraceRequest(
                log_file=str(tmp_path / "out"), start_step=10**9, iterations=1, activities=["CPU"]
            ),
            timeout=10,
        )
        stream = stub.WatchTrace(pb.GetTraceRequest(trace_id=trace.trace_id), timeout=120)
        assert next(stream).trace_id == trace.trace_id

        renewed = cf.leaf(authority.ca, Role.SERVER, "localhost")
        install(dirs.server, renewed)
        wait_for_serial(d, alice, renewed.cert.serial_number)
        # The stream opened before the renewal goes on, on its old TLS session: the job's end, after the
        # renewal, still reaches it.
        job.stop()
        last = list(stream)[-1]
        assert last.done and "exited" in last.processes[0].error, last
    assert stream.code() is grpc.StatusCode.OK
    assert log_says(
        d,
        "INFO dynolog.tls: reloaded the TLS set: serving as CN=localhost "
        f"(serial {renewed.cert.serial_number:X})",
    )
    d.dyno("--certs-dir", str(dirs.alice), "status", expect=0)  # dyno trusts it: the same CA


def test_a_half_written_or_broken_set_is_refused_and_the_previous_one_kept(
    start_daemon: Callable[..., Daemon], dirs: Dirs, authority: Authority, bundle: Bundle
) -> None:
    d = start_daemon("--certs-dir", str(dirs.server))
    alice = bundle(authority.alice)
    old = authority.server.cert.serial_number
    renewed = cf.leaf(authority.ca, Role.SERVER, "localhost")
    write_private(dirs.server.cert, cf.pem(renewed.cert))  # its key is not there yet
    refusal = (
        f"ERROR dynolog.tls: the TLS files in {dirs.server} changed but are not usable; still serving the "
        f"previous set (server.crt serial {old:X}) until they are fixed: {dirs.server.key}: private key: "
        f"does not match {dirs.server.cert}; needs the key the certificate was made for"
    )
    wait_until(
        lambda: served_serial(d, alice) and log_says(d, refusal), what="the half-written set to be refused"
    )
    assert served_serial(d, alice) == old
    assert status(d, credentials(authority.ca, authority.alice)).tls

    write_private(dirs.server.key, cf.key_pem(renewed.key))  # the set is whole again
    wait_for_serial(d, alice, renewed.cert.serial_number)

    write_private(dirs.server.cert, b"not a certificate\n")
    garbage = (
        f"serial {renewed.cert.serial_number:X}) until they are fixed: {dirs.server.cert}: file: "
        "not a PEM certificate"
    )
    wait_until(lambda: served_serial(d, alice) and log_says(d, garbage), what="the broken set to be refused")
    assert served_serial(d, alice) == renewed.cert.serial_number
    assert status(d, credentials(authority.ca, authority.bob)).tls


def test_a_new_ca_admits_its_clients_refuses_the_old_ones_and_the_crl_follows_it(
    start_daemon: Callable[..., Daemon],
    dirs: Dirs,
    authority: Authority,
    other_authority: Authority,
    bundle: Bundle,
) -> None:
    write_private(dirs.server.crl, cf.revocation_list(authority.ca))  # nobody revoked, by the old CA
    d = start_daemon("--certs-dir", str(dirs.server))
    new = other_authority
    install(dirs.server, new.server, ca=new.ca)
    wait_for_serial(d, bundle(new.alice), new.server.cert.serial_number)

    # A client of the old CA is refused by the handshake, even one that trusts the new server.
    assert call_fails(d, credentials(new.ca, authority.alice)).code() is grpc.StatusCode.UNAVAILABLE
    # A client of the new CA passes it, but the old CA's CRL cannot vouch for it: closed, saying why.
    err = call_fails(d, credentials(new.ca, new.alice))
    assert err.code() is grpc.StatusCode.UNAUTHENTICATED
    assert f"the daemon cannot check revocation ({dirs.server.crl}: signature: not signed by the CA in" in (
        err.details() or ""
    )
    # The new CA's CRL: alice is revoked at her next call, the other client goes on being served.
    write_private(dirs.server.crl, cf.revocation_list(new.ca, [new.alice.cert]))
    err = call_fails(d, credentials(new.ca, new.alice))
    assert err.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "revoked on" in (err.details() or "")
    assert status(d, credentials(new.ca, new.bob)).tls  # its second client, eve


def test_a_garbage_crl_refuses_every_client_saying_why_until_a_good_one_is_back(
    tls_daemon: Daemon, dirs: Dirs, authority: Authority
) -> None:
    bob, alice = credentials(authority.ca, authority.bob), credentials(authority.ca, authority.alice)
    write_private(dirs.server.crl, cf.revocation_list(authority.ca, [authority.alice.cert]))
    assert status(tls_daemon, bob).tls
    assert call_fails(tls_daemon, alice).code() is grpc.StatusCode.UNAUTHENTICATED

    write_private(dirs.server.crl, b"-----BEGIN X509 CRL-----\ntruncated\n")
    err = call_fails(tls_daemon, bob)
    assert (err.code(), err.details()) == (
        grpc.StatusCode.UNAUTHENTICATED,
        f"client certificate 'bob' (serial {authority.bob.cert.serial_number:X}): the daemon cannot check "
        f"revocation ({dirs.server.crl}: file: not a PEM certificate revocation list; needs a PEM CRL); "
        "every client is refused until it is fixed",
    )
    assert log_says(
        tls_daemon,
        f"ERROR dynocerts.crl: {dirs.server.crl}: file: not a PEM certificate revocation list; needs a "
        "PEM CRL; refusing every client until it is fixed",
    )

    write_private(dirs.server.crl, cf.revocation_list(authority.ca, [authority.alice.cert]))
    assert status(tls_daemon, bob).tls
    assert call_fails(tls_daemon, alice).code() is grpc.StatusCode.UNAUTHENTICATED  # still revoked


def test_an_encrypted_key_is_reloaded_with_the_password_file(
    start_daemon: Callable[..., Daemon], tmp_path: Path, dirs: Dirs, authority: Authority, bundle: Bundle
) -> None:
    server = cf.certs_dir(tmp_path / "encrypted", Role.SERVER, authority.ca, authority.server, password=b"pw")
    password = cf.write(tmp_path / "pw", b"pw\n")
    d = start_daemon("--certs-dir", str(server), "--key-password-file", str(password))
    renewed = cf.leaf(authority.ca, Role.SERVER, "localhost")
    install(server, renewed, password=b"pw")
    wait_for_serial(d, bundle(authority.alice), renewed.cert.serial_number)
    d.dyno("--certs-dir", str(dirs.alice), "status", expect=0)
