"""Shared material for the security tests: one EC CA with its server and clients per session (fast),
per-test directories written from it, and a way to run a daemon that is expected not to start."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional

import grpc
import pytest

import certs_factory as cf
from dynocerts.keys import pkcs8_pem
from dynocerts.make import Issued
from dynocerts.policy import Role
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import BIN, Daemon


@dataclass(frozen=True)
class Authority:
    ca: Issued
    server: Issued
    alice: Issued  # operator
    bob: Issued  # a second client, to show others keep being served


@pytest.fixture(scope="session")
def authority() -> Authority:
    ca = cf.authority()
    return Authority(
        ca,
        cf.leaf(ca, Role.SERVER, "localhost"),
        cf.leaf(ca, Role.CLIENT, "alice"),
        cf.leaf(ca, Role.CLIENT, "bob"),
    )


@pytest.fixture(scope="session")
def other_authority() -> Authority:
    ca = cf.authority(cn="Other CA")
    return Authority(
        ca,
        cf.leaf(ca, Role.SERVER, "localhost"),
        cf.leaf(ca, Role.CLIENT, "alice"),
        cf.leaf(ca, Role.CLIENT, "eve"),
    )


@pytest.fixture(scope="session")
def rsa_authority() -> Issued:
    return cf.authority("rsa3072", cn="RSA CA")


@dataclass(frozen=True)
class Dirs:
    server: cf.CertsDir
    alice: cf.CertsDir
    bob: cf.CertsDir


@pytest.fixture
def dirs(tmp_path: Path, authority: Authority) -> Dirs:
    a = authority
    return Dirs(
        cf.certs_dir(tmp_path / "server", Role.SERVER, a.ca, a.server),
        cf.certs_dir(tmp_path / "alice", Role.CLIENT, a.ca, a.alice),
        cf.certs_dir(tmp_path / "bob", Role.CLIENT, a.ca, a.bob),
    )


@pytest.fixture
def tls_daemon(start_daemon: Callable[..., Daemon], dirs: Dirs) -> Daemon:
    return start_daemon("--certs-dir", str(dirs.server))


def credentials(trust: Issued, own: Optional[Issued]) -> grpc.ChannelCredentials:
    """Raw gRPC credentials, bypassing dyno's own checks: what a hand-made client could present."""
    if own is None:
        return grpc.ssl_channel_credentials(root_certificates=cf.pem(trust.cert))
    return grpc.ssl_channel_credentials(cf.pem(trust.cert), pkcs8_pem(own.key), cf.pem(own.cert))


def status(d: Daemon, creds: grpc.ChannelCredentials, host: str = "localhost") -> pb.GetStatusResponse:
    with grpc.secure_channel(f"{host}:{d.port}", creds) as channel:
        return pb_grpc.DynologStub(channel).GetStatus(pb.GetStatusRequest(), timeout=10)


def call_fails(d: Daemon, creds: grpc.ChannelCredentials) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        status(d, creds)
    return err.value


FailedStart = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def failed_start(tmp_path: Path) -> FailedStart:
    """Run dynolog expecting it to refuse to start; returns the finished process (stdin is not a TTY,
    so no password prompt can wait)."""

    def run(*args: str, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        cmd = [str(BIN / "dynolog"), "--port", "0", "--log-file", str(tmp_path / "failed.log"), *args]
        result = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **(env or {})},
        )
        assert result.returncode != 0, f"dynolog started:\n{result.stdout}\n{result.stderr}"
        return result

    return run
