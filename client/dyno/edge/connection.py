"""Reaching a daemon: the gRPC channel to the target a user named, and what a failure means."""

from __future__ import annotations

import contextlib
import functools
import ssl
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

import grpc

from dynoproto import dynolog_pb2_grpc as pb_grpc

from ..exits import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, CliError
from ..fleet.target import KEY_PASSWORD_ENV, Target

if TYPE_CHECKING:
    from dynocerts.material import Material

    from .legacy import LegacyHost


def client_material(target: Target) -> Material:
    """The checked ca.crt, client.crt and client.key of ``--certs-dir``; every problem is reported."""
    # dynocerts loads cryptography, which only a mutual-TLS connection needs.
    from dynocerts.keys import PasswordSource
    from dynocerts.material import CertsError
    from dynocerts.tls import load_client

    assert target.certs_dir is not None
    password_file = Path(target.key_password_file) if target.key_password_file else None
    try:
        material = load_client(Path(target.certs_dir), PasswordSource(password_file, (KEY_PASSWORD_ENV,)))
    except CertsError as exc:
        problems = "\n".join(f"  {v}" for v in exc.violations)
        raise CliError(f"cannot use --certs-dir {target.certs_dir}:\n{problems}", EXIT_USAGE) from None
    for warning in material.warnings:
        print(f"dyno: {warning}", file=sys.stderr)
    return material


# A plaintext connection that has not got the server's HTTP/2 SETTINGS frame by then fails
# (UNAVAILABLE) instead of waiting out the call's --timeout: the stock C++ dynolog never sends one
# (see dyno.edge.legacy), and a daemon of this project sends it at once. (The stock daemon has no TLS, and
# msMonitor's fails a gRPC TLS handshake at once: TLS channels keep gRPC's own bound.)
HANDSHAKE_S = 3.0


def open_channel(target: Target) -> grpc.Channel:
    if target.tls:
        return grpc.secure_channel(target.address, credentials(target))
    handshake_ms = int(1000 * handshake_s(target))
    return grpc.insecure_channel(target.address, [("grpc.min_reconnect_backoff_ms", handshake_ms)])


def handshake_s(target: Target) -> float:
    """At most half the --timeout, so that a legacy daemon's answer still fits in the rest."""
    return min(HANDSHAKE_S, target.timeout / 2)


def credentials(target: Target) -> grpc.ChannelCredentials:
    """The target's TLS credentials, read and checked once per process however many hosts use them."""
    from dynocerts.tls import channel_credentials  # cryptography, as in client_material

    return channel_credentials(_material(target.certs_dir, target.key_password_file))


def legacy_tls(target: Target) -> Optional[ssl.SSLContext]:
    """The TLS context msMonitor's daemon expects, from the same --certs-dir; None for plaintext."""
    if not target.tls:
        return None
    return _legacy_tls(target.certs_dir, target.key_password_file)


@functools.lru_cache(maxsize=None)
def _material(certs_dir: Optional[str], key_password_file: Optional[str]) -> Material:
    return client_material(Target(certs_dir=certs_dir, key_password_file=key_password_file))


@functools.lru_cache(maxsize=None)
def _legacy_tls(certs_dir: Optional[str], key_password_file: Optional[str]) -> ssl.SSLContext:
    from dynocerts.tls import client_ssl_context  # cryptography, as in client_material

    return client_ssl_context(_material(certs_dir, key_password_file))


@contextlib.contextmanager
def connect(target: Target, feature: str) -> Iterator[pb_grpc.DynologStub]:
    """A stub for one command; gRPC errors become :class:`CliError` with what to check. A host whose
    daemon turns out to be a C++ one raises :class:`LegacyDaemon`, its message naming
    *feature* (``dyno processes``, ``--wait``) as what needs this project's daemon."""
    started = time.monotonic()
    channel = open_channel(target)
    try:
        yield pb_grpc.DynologStub(channel)
    except grpc.RpcError as exc:
        channel.close()  # before any legacy call: the stock daemon serves one connection at a time
        raise failure(target, exc, feature, started) from None
    finally:
        channel.close()


class LegacyDaemon(CliError):
    """Raised by :func:`connect` instead of the gRPC failure when the host turned out to be a C++ daemon
    (:mod:`.legacy`): a command that can ask it in its own RPC catches it; for any other, the message
    says so and names the *feature*."""

    def __init__(self, host: LegacyHost, feature: str) -> None:
        refusal = host.refusal(feature)
        super().__init__(str(refusal), refusal.exit_code)
        self.host = host


def failure(target: Target, exc: grpc.RpcError, feature: str, started: float) -> CliError:
    """The gRPC failure as a CliError, or as LegacyDaemon when a legacy getStatus answers instead.
    The legacy calls end with the host's --timeout, but get two handshakes' time at least: gRPC may
    still hold a connection it was making when the call failed (closed at its handshake bound), and
    the stock daemon serves the next connection only after it."""
    from . import legacy  # a C++ daemon's wire: only when gRPC failed as it fails

    error = rpc_error(target, exc)
    code = exc.code() if isinstance(exc, grpc.Call) else None
    if code is grpc.StatusCode.UNAVAILABLE and legacy.suspect(target, exc.details() or ""):
        deadline = max(started + target.timeout, time.monotonic() + 2 * handshake_s(target))
        host = legacy.probe(target, deadline, legacy_tls(target))
        if host is not None:
            return LegacyDaemon(host, feature)
    return error


def rpc_error(target: Target, exc: grpc.RpcError) -> CliError:
    code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
    detail = (exc.details() if isinstance(exc, grpc.Call) else str(exc)) or ""
    reason = unreachable_reason(target, code, detail)
    if code is grpc.StatusCode.UNAVAILABLE:
        transport = transport_failure(target, detail)
        if transport is not None:
            return CliError(
                f"cannot reach dynolog at {target.address}: {transport}", EXIT_UNREACHABLE, reason
            )
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return CliError(
            f"cannot reach dynolog at {target.address}: {detail}\n"
            f"Check that the daemon runs on {target.hostname} (dynolog --port {target.port}), that the port "
            "is reachable from here, and that --certs-dir matches the daemon's.",
            EXIT_UNREACHABLE,
            reason,
        )
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return CliError(
            f"dynolog at {target.address} refused this client: {detail}\n"
            "Ask whoever runs the CA for a new client certificate.",
            EXIT_UNREACHABLE,
            reason,
        )
    return CliError(f"dynolog at {target.address} answered {code.name}: {detail}", EXIT_FAILED)


def unreachable_reason(target: Target, code: grpc.StatusCode, detail: str) -> str:
    """Why a call reached no daemon, in one word a fan-out's summary counts by: refused, TLS, timeout,
    DNS or unavailable (anything else on the way); "" when a daemon answered."""
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return "timeout"
    if code is grpc.StatusCode.UNAUTHENTICATED:  # the daemon refused our client certificate
        return "TLS"
    if code is not grpc.StatusCode.UNAVAILABLE:
        return ""
    if "resolving" in detail or "DNS resolution failed" in detail:  # gRPC's wording, new and old
        return "DNS"
    if "Connection refused" in detail:
        return "refused"
    if "timed out" in detail:  # connect() or the SETTINGS frame, within HANDSHAKE_S
        return "timeout"
    return "TLS" if transport_failure(target, detail) is not None else "unavailable"


def transport_failure(target: Target, detail: str) -> Optional[str]:
    """What a failed connection means for TLS, read from gRPC's error text; None when it is not TLS."""
    certs = target.certs_dir
    if "Hostname Verification Check failed" in detail:
        return (
            f"the daemon's certificate does not name '{target.hostname}' (TLS hostname check)\n"
            "Give as --hostname a name in the daemon's server.crt subjectAltName (`dyno certs check` on "
            "the daemon's --certs-dir lists them), or issue it one with that name (dyno certs issue)."
        )
    if "CERTIFICATE_VERIFY_FAILED" in detail:
        reason = detail.split("CERTIFICATE_VERIFY_FAILED:", 1)[1].split(":")[0].strip()
        return (
            f"the daemon's certificate is not trusted ({reason})\n"
            f"Check that {certs}/ca.crt is the CA that issued the daemon's server.crt, and that the "
            "daemon's certificate is within its validity."
        )
    if "WRONG_VERSION_NUMBER" in detail:
        return (
            "the daemon does not speak TLS (it runs with --certs-dir NO_CERTS or without --certs-dir)\n"
            "Use the same --certs-dir mode on both sides."
        )
    if "Socket closed" in detail and target.tls:
        return (
            f"the daemon closed the connection during the TLS handshake: it refused our client "
            f"certificate {certs}/client.crt\n"
            "Check that it was issued by the CA in the daemon's ca.crt (`dyno certs check` on both "
            "directories) and that the daemon's clock is right."
        )
    if "Socket closed" in detail:
        return (
            "the daemon closed the connection: it probably requires mutual TLS\n"
            "Give --certs-dir DIR (with ca.crt, client.crt, client.key) when the daemon has --certs-dir."
        )
    return None
