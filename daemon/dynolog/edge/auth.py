"""Who may call what, under mutual TLS: revocation and the read-only / operator split.

gRPC's TLS stack has verified the client certificate against ``ca.crt`` before any of this runs; what
it cannot do from Python is consult a CRL, so every RPC checks the peer's serial against the CRL as it
is on disk now (:class:`dynocerts.crl.RevocationWatch`), then the client's role against the method.
:func:`authorize` is the whole decision, a pure function; :class:`AuthInterceptor` only applies it.
"""

from __future__ import annotations

import enum
import fnmatch
import functools
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Mapping, Optional, Sequence, Tuple

import grpc
from cryptography import x509

from dynocerts.policy import common_name
from dynoproto import SERVICE

from ..core.logs import Once
from .guards import UNIMPLEMENTED, Context, guarded

log = logging.getLogger("dynolog.edge.auth")

# What a read-only client may call: our service's reads, by the naming rule of dynolog.proto (Get*,
# List*, Watch* only read; anything that changes a process has another verb), plus health and
# reflection so generic tools work.
READ_ONLY_PREFIXES = tuple(f"/{SERVICE}/{verb}" for verb in ("Get", "List", "Watch"))
READ_ONLY_METHODS = frozenset(
    {
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    }
)


def is_read_only(method: str) -> bool:
    return method in READ_ONLY_METHODS or method.startswith(READ_ONLY_PREFIXES)


class Access(enum.Enum):
    OPERATOR = "operator"
    READ_ONLY = "read-only"
    NONE = "none"


@dataclass(frozen=True)
class AccessPolicy:
    """Roles by fnmatch patterns on the client certificate's subject CN.

    An explicit operator pattern wins over a read-only one; a CN matching neither is an operator only
    while no ``--operator-clients`` is given (the default: every valid client is an operator).
    """

    operators: Optional[Tuple[str, ...]] = None  # None: flag not given
    read_only: Tuple[str, ...] = ()

    def access(self, common_name: str) -> Access:
        if self.operators and _matches(common_name, self.operators):
            return Access.OPERATOR
        if _matches(common_name, self.read_only):
            return Access.READ_ONLY
        return Access.OPERATOR if self.operators is None else Access.NONE


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


@dataclass(frozen=True)
class Peer:
    common_name: str
    serial: int

    def describe(self) -> str:
        return f"'{self.common_name}' (serial {self.serial:X})"


@dataclass(frozen=True)
class Refusal:
    code: grpc.StatusCode
    message: str


Revocation = Callable[[int], Optional[str]]  # serial -> why it is refused, or None


def authorize(
    peer: Optional[Peer], method: str, policy: AccessPolicy, revocation: Revocation
) -> Optional[Refusal]:
    """None when *peer* may call *method*; otherwise the status and message it gets."""
    if peer is None:
        return Refusal(
            grpc.StatusCode.UNAUTHENTICATED, "no client certificate: this daemon requires mutual TLS"
        )
    revoked = revocation(peer.serial)
    if revoked is not None:
        return Refusal(grpc.StatusCode.UNAUTHENTICATED, f"client certificate {peer.describe()}: {revoked}")
    access = policy.access(peer.common_name)
    if access is Access.NONE:
        return Refusal(
            grpc.StatusCode.PERMISSION_DENIED,
            f"client '{peer.common_name}' matches neither --operator-clients nor --read-only-clients "
            f"of this daemon: {method} refused",
        )
    if access is Access.READ_ONLY and not is_read_only(method):
        return Refusal(
            grpc.StatusCode.PERMISSION_DENIED,
            f"client '{peer.common_name}' is read-only on this daemon (--read-only-clients): "
            f"{method} needs an operator (--operator-clients)",
        )
    return None


@functools.lru_cache(maxsize=256)
def peer_from_pem(pem: bytes) -> Optional[Peer]:
    """The peer a verified certificate names; cached, as one client makes many calls."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None
    return Peer(common_name(cert), cert.serial_number)


def peer_of(auth_context: Mapping[str, Iterable[bytes]]) -> Optional[Peer]:
    pem = next(iter(auth_context.get("x509_pem_cert", ())), None)
    return peer_from_pem(pem) if pem else None


class RefusalLog:
    """Each refusal logged once per client and code: a refused client retrying must not flood the log."""

    def __init__(self) -> None:
        self._once = Once(period_s=float("inf"))

    def note(self, peer: Optional[Peer], method: str, refusal: Refusal) -> None:
        if self._once((peer.describe() if peer else "-", refusal.code.name)):
            log.warning("refused %s: %s", method, refusal.message)


class AuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, policy: AccessPolicy, revocation: Revocation, refusals: RefusalLog) -> None:
        self._policy = policy
        self._revocation = revocation
        self._refusals = refusals

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method

        async def enforce(context: Context) -> None:
            peer = peer_of(context.auth_context())
            refusal = authorize(peer, method, self._policy, self._revocation)
            if refusal is not None:
                self._refusals.note(peer, method, refusal)
                await context.abort(refusal.code, refusal.message)

        # An unknown method is authorized like any other first: a refused client learns nothing.
        return guarded(handler or UNIMPLEMENTED, enforce)
