"""Per-client limits of the gRPC server: a request rate and a number of open streams.

A client is who gRPC vouches for: the CN of its verified certificate under mutual TLS, else its IP
address (a plaintext daemon cannot tell two local users apart, so they share one allowance). Every
call, unary or the opening of a stream, takes a token from the client's bucket, which holds up to
``--client-rate-burst`` tokens and refills at ``--client-rate-limit`` per second. A call that streams
(``WatchTrace``, ``WatchMetrics``, ``Dynamic``, health ``Watch``, reflection) also holds one of the
client's ``--max-client-streams`` slots until it ends, however it ends. A refused call gets
``RESOURCE_EXHAUSTED`` naming the limit and its flag; refusals are logged at most once a minute per
client. Messages inside an open stream are not counted: the stream was admitted.
"""

from __future__ import annotations

import logging
import math
import time
import urllib.parse
from dataclasses import dataclass
from typing import Awaitable, Callable, Dict, Optional

import grpc

from msmonitor_contract.numbers import strict_int

from .auth import Peer, peer_of
from .guards import UNIMPLEMENTED, Context, guarded

log = logging.getLogger("dynolog.edge.limits")

REPORT_EVERY_S = 60.0
# Clients remembered before idle ones (no open stream, full bucket: the same as never seen) are dropped.
MAX_TRACKED = 4096


@dataclass(frozen=True)
class Limits:
    rate: float  # requests per second per client, sustained; 0: unlimited
    burst: int  # requests a client may make at once before the rate applies
    streams: int  # streams a client may hold open at once; 0: unlimited
    flags: str = "--client-rate-limit, --client-rate-burst"  # where a refusal tells the client to look

    @property
    def enabled(self) -> bool:
        return self.rate > 0 or self.streams > 0


@dataclass
class TokenBucket:
    rate: float  # tokens added per second
    capacity: float
    tokens: float
    updated: float  # clock reading of the last refill

    @classmethod
    def full(cls, rate: float, capacity: float, now: float) -> TokenBucket:
        return cls(rate, capacity, capacity, now)

    def take(self, now: float) -> bool:
        self._refill(now)
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def wait_s(self) -> float:
        """Seconds until the next token, as of the last refill."""
        return max(0.0, 1 - self.tokens) / self.rate

    def is_full(self, now: float) -> bool:
        return self.share_left(now) >= 1

    def share_left(self, now: float) -> float:
        """The part of the bucket still full, 0..1."""
        self._refill(now)
        return self.tokens / self.capacity

    def _refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now


@dataclass(frozen=True)
class Client:
    key: str  # what the allowance is kept under
    name: str  # as messages say it: 'alice', or at 10.0.0.7


def client_of(context: Context, peer_address: Callable[[str], str]) -> Client:
    """The client of a gRPC call; *peer_address* names the connection's far end (the port in front of
    gRPC relays connections, so gRPC itself sees a local one)."""
    return client_for(peer_of(context.auth_context()), peer_host(peer_address(context.peer())))


def client_for(peer: Optional[Peer], host: str) -> Client:
    """The certificate's name when there is one, else the address: whichever wire the call came by."""
    if peer is not None:
        return Client(f"cn:{peer.common_name}", f"'{peer.common_name}'")
    return Client(f"ip:{host}", f"at {host}")


def peer_host(peer: str) -> str:
    """The host of a gRPC peer string: every connection from one address is one client, whatever its port.

    ``ipv4:10.0.0.7:51234`` and ``ipv6:[::1]:51234`` (gRPC may percent-encode the brackets).
    """
    _, _, address = urllib.parse.unquote(peer).partition(":")
    if address.startswith("["):
        return address[1 : address.find("]")]
    host, _, port = address.rpartition(":")
    return host if host and strict_int(port) is not None else address


@dataclass
class _Usage:
    bucket: Optional[TokenBucket]  # None: no rate limit
    streams: int = 0
    refused: int = 0  # since the last report
    reported: float = -math.inf

    def idle(self, now: float) -> bool:
        return self.streams == 0 and (self.bucket is None or self.bucket.is_full(now))


class ClientLimiter:
    """Each client's bucket and open streams; used from the event loop only."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._clients: Dict[str, _Usage] = {}
        self._prune_at = MAX_TRACKED

    def admit(self, client: Client, method: str, stream: bool) -> Optional[str]:
        """None when the call may go on (a stream then holds a slot until :meth:`release`); else why not."""
        now = self._clock()
        usage = self._usage(client, now)
        refusal = self._refusal(client, usage, stream, now)
        if refusal is None:
            usage.streams += stream
        else:
            self._report(usage, method, refusal, now)
        return refusal

    def release(self, client: Client) -> None:
        usage = self._clients.get(client.key)
        if usage is not None and usage.streams > 0:
            usage.streams -= 1

    def share_left(self, client: Client) -> float:
        """The part of *client*'s burst it has not used, 0..1 (1: not rate-limited, or never seen)."""
        usage = self._clients.get(client.key)
        if usage is None or usage.bucket is None:
            return 1.0
        return usage.bucket.share_left(self._clock())

    def tracked(self) -> int:
        """How many clients are remembered (bounded: idle ones are dropped)."""
        return len(self._clients)

    def _refusal(self, client: Client, usage: _Usage, stream: bool, now: float) -> Optional[str]:
        limits = self.limits
        if usage.bucket is not None and not usage.bucket.take(now):
            return (
                f"rate limit: more than {limits.rate:g} requests/s (bursts of {limits.burst}) from client "
                f"{client.name} ({limits.flags}); retry in "
                f"{math.ceil(usage.bucket.wait_s() * 1000)} ms"
            )
        if stream and limits.streams and usage.streams >= limits.streams:
            return (
                f"stream limit: more than {limits.streams} concurrent streams from client {client.name} "
                "(--max-client-streams); end one first"
            )
        return None

    def _usage(self, client: Client, now: float) -> _Usage:
        usage = self._clients.get(client.key)
        if usage is None:
            if len(self._clients) >= self._prune_at:
                self._prune(now)
            rate = self.limits.rate
            usage = _Usage(TokenBucket.full(rate, self.limits.burst, now) if rate > 0 else None)
            self._clients[client.key] = usage
        return usage

    def _prune(self, now: float) -> None:
        self._clients = {key: u for key, u in self._clients.items() if not u.idle(now)}
        # Doubling keeps the pruning cost per new client constant when many clients are all busy.
        self._prune_at = max(MAX_TRACKED, 2 * len(self._clients))

    def _report(self, usage: _Usage, method: str, refusal: str, now: float) -> None:
        if now - usage.reported < REPORT_EVERY_S:
            usage.refused += 1
            return
        more = f" ({usage.refused} more refused since the last report)" if usage.refused else ""
        log.warning("refused %s: %s%s", method, refusal, more)
        usage.reported, usage.refused = now, 0


Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[Optional[grpc.RpcMethodHandler]]]


class LimitInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, limiter: ClientLimiter, peer_address: Callable[[str], str] = str) -> None:
        self._limiter = limiter
        self._peer_address = peer_address

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        # Unknown methods are counted too: a client cannot probe for names faster than it may call.
        handler = await continuation(handler_call_details) or UNIMPLEMENTED
        method = handler_call_details.method
        stream = bool(handler.request_streaming or handler.response_streaming)

        async def limit(context: Context) -> None:
            client = client_of(context, self._peer_address)
            refusal = self._limiter.admit(client, method, stream)
            if refusal is not None:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
            if stream:
                # Runs however the call ends (done, failed, cancelled by the client, connection lost).
                # (grpc-stubs declare DoneCallback a class; any callable taking the context is meant.)
                context.add_done_callback(lambda _: self._limiter.release(client))  # type: ignore[arg-type]

        return guarded(handler, limit)
