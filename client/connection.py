"""Reaching a daemon: the target a user named, the gRPC channel to it, and what a failure means."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator, Optional

import grpc
from dynoproto import dynolog_pb2_grpc as pb_grpc

from .exits import EXIT_FAILED, EXIT_UNREACHABLE, CliError

NO_CERTS = "NO_CERTS"


@dataclass(frozen=True)
class Target:
    hostname: str = "localhost"
    port: int = 1778
    certs_dir: Optional[str] = None
    timeout: float = 10.0
    json: bool = False

    @property
    def address(self) -> str:
        host = self.hostname
        return f"[{host}]:{self.port}" if ":" in host and not host.startswith("[") else f"{host}:{self.port}"


def open_channel(target: Target) -> grpc.Channel:
    if target.certs_dir not in (None, NO_CERTS):
        raise CliError(f"--certs-dir {target.certs_dir}: TLS is not available in this build; use {NO_CERTS}")
    return grpc.insecure_channel(target.address)


@contextlib.contextmanager
def connect(target: Target) -> Iterator[pb_grpc.DynologStub]:
    """A stub for one command; gRPC errors become :class:`CliError` with what to check."""
    channel = open_channel(target)
    try:
        yield pb_grpc.DynologStub(channel)
    except grpc.RpcError as exc:
        raise rpc_error(target, exc) from None
    finally:
        channel.close()


def rpc_error(target: Target, exc: grpc.RpcError) -> CliError:
    code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
    detail = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return CliError(
            f"cannot reach dynolog at {target.address}: {detail}\n"
            f"Check that the daemon runs on {target.hostname} (dynolog --port {target.port}), that the port "
            "is reachable from here, and that --certs-dir matches the daemon's.",
            EXIT_UNREACHABLE,
        )
    return CliError(f"dynolog at {target.address} answered {code.name}: {detail}", EXIT_FAILED)
