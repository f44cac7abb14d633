"""The port: each connection, once the doorway (:mod:`.doorway`) has its first bytes, relayed to gRPC
or answered in the legacy JSON RPC; every one counted in the census (:mod:`.census`).

Every legacy connection is bounded: its request must arrive (TLS handshake included) within
:data:`READ_TIMEOUT_S`, its length must be 1..MAX_REQUEST, and the reply must be taken within
:data:`WRITE_TIMEOUT_S`; anything else is closed without a word, as the C++ daemons do. New legacy
connections are limited per sender (``--legacy-connection-rate``), and so are new TLS connections of
either kind (``--tls-handshake-rate``), each also of all senders together (:mod:`.gate`): a legacy one
in TLS costs a handshake on the event loop that relays gRPC, a gRPC one a handshake in gRPC.
gRPC connections are relayed for their whole life, untouched; one in TLS may spend
:data:`HANDSHAKE_TIMEOUT_S` silent after its ClientHello and as long again finishing its handshake
(gRPC's own handshake deadline, 5 s past the first, ends it before the second runs out), and few may
be in either stage at once
(:data:`BOUNDS`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
import time
from typing import Optional, Set, Tuple, Union

from dynoproto import legacy
from dynoproto.legacy import LegacyError

from ...core import memory
from ...core.logs import Once
from ..auth import peer_from_pem
from ..legacy.service import Caller, LegacyService
from ..tls import ServerTls
from .census import Bound, Census, Closed, Entry, Stage, connection_budget
from .doorway import Arrival, Doorway
from .gate import Gate
from .relay import Behind, Handshake, Peers, relay
from .sniff import FIRST, Sniffed, Start
from .tls_stream import TlsStream

log = logging.getLogger("dynolog.edge.port")

READ_TIMEOUT_S = 3.0  # msMonitor's daemon times a read out after 3 s
WRITE_TIMEOUT_S = 3.0
HANDSHAKE_TIMEOUT_S = 10.0  # gRPC's own is 120 s; a real handshake takes a few round trips
# An honest client sends its first bytes at once, and finishes its handshake within milliseconds: few
# of its connections are ever in a stage before served. The caps bound what a flood holds (in a TLS
# handshake: three descriptors and about 35 KB of gRPC's each).
BOUNDS = {
    Stage.WAITING: Bound(per_source=256, total=1024, timeout_s=READ_TIMEOUT_S),
    Stage.HELLO: Bound(per_source=64, total=256, timeout_s=HANDSHAKE_TIMEOUT_S),
    Stage.FINISHING: Bound(per_source=64, total=256, timeout_s=HANDSHAKE_TIMEOUT_S),
}
SWEEP_EVERY_S = 0.5
# Connections admitted since memory was last given back: once a quarter of the most held at once remain
# (a flood is over), it is given back again.
MEMORY_TRIM_AFTER = 1024
REPORT_EVERY_S = 60.0
_GRPC_ALPN = "h2"


class Port:
    """The listening socket in front of the gRPC server (on a loopback port of its own)."""

    def __init__(self, legacy_gate: Optional[Gate] = None, tls_gate: Optional[Gate] = None) -> None:
        self.peers = Peers()  # made first: the gRPC server's limits resolve relayed clients with it
        # New legacy connections (--legacy-connection-rate) and TLS ones (--tls-handshake-rate) per
        # sender and of all together: those over it are closed unread, so a flood costs an accept, a
        # read and a close each, and the clients on the port go on being served.
        self._legacy_gate = legacy_gate
        self._tls_gate = tls_gate
        self.census = Census(BOUNDS, connection_budget(), time.monotonic)
        self._sweeper: Optional[asyncio.TimerHandle] = None
        self._reported = -REPORT_EVERY_S  # the first closing is said at once
        self._trimmed_at = 0  # connections admitted when memory was last given back
        self._legacy: Optional[LegacyService] = None
        self._behind: Optional[Behind] = None
        self._tls: Optional[ServerTls] = None
        self._doorway: Optional[Doorway] = None
        self._connections: Set[asyncio.Task[None]] = set()
        self._refused_plaintext = Once(period_s=float("inf"))  # once per address and protocol
        self._said = Once()

    async def start(
        self,
        host: str,
        port: int,
        legacy_service: LegacyService,
        grpc_server: Tuple[str, int],
        tls: Optional[ServerTls],
    ) -> int:
        """The port listened on; raises OSError when it cannot be had."""
        self._legacy, self._tls = legacy_service, tls
        self._behind = Behind(grpc_server, self.peers)
        sock = socket.create_server(
            (host, port),
            family=socket.AF_INET6 if ":" in host else socket.AF_INET,
            dualstack_ipv6=host == "::",  # as gRPC listens on [::]: IPv4 clients too
            backlog=1024,
        )
        self._doorway = Doorway(sock, self.census, self._arrived, self._decided)
        self._doorway.open()
        self._sweeper = asyncio.get_running_loop().call_later(SWEEP_EVERY_S, self._sweep)
        return int(sock.getsockname()[1])

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._doorway is not None:
            self._doorway.close()
            self._doorway = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    def _decided(self, arrival: Arrival, sniffed: Sniffed) -> None:
        """A connection that said what it speaks: relayed, answered, or closed at once."""
        grpc = sniffed.start is Start.HTTP2 or (
            # A plaintext daemon leaves TLS to gRPC to refuse, as it did before legacy clients came.
            sniffed.start is Start.TLS and (_GRPC_ALPN in sniffed.alpn or self._tls is None)
        )
        entry = arrival.entry
        assert entry is not None
        if not self._admitted(arrival, sniffed.start, grpc):
            self.census.leave(entry)
            arrival.sock.close()
            return
        handshake = None
        if grpc and sniffed.start is Start.TLS and self._tls is not None:
            handshake = Handshake(functools.partial(self.census.advance, entry))
        task = asyncio.get_running_loop().create_task(self._serve(arrival, sniffed.start, grpc, handshake))
        entry.close = task.cancel
        self.census.advance(entry, Stage.HELLO if handshake is not None else Stage.SERVED)
        self._connections.add(task)
        task.add_done_callback(lambda done: self._ended(done, entry, arrival))

    def _ended(self, task: asyncio.Task[None], entry: Entry, arrival: Arrival) -> None:
        self._connections.discard(task)
        self.census.leave(entry)
        if not arrival.taken:  # closed for a bound before its task ran: nothing else would close it
            arrival.sock.close()

    async def _serve(
        self, arrival: Arrival, start: Start, grpc: bool, handshake: Optional[Handshake]
    ) -> None:
        sock, host, data = arrival.sock, arrival.host, arrival.data
        arrival.taken = True
        try:
            reader, writer = await asyncio.open_connection(sock=sock)
        except OSError:
            sock.close()
            return
        try:
            if grpc:
                assert self._behind is not None
                await relay(reader, writer, data, self._behind, handshake)
            elif start is Start.TLS:
                await self._legacy_in_tls(reader, writer, host, data)
            else:
                body = await asyncio.wait_for(_body(reader, data), READ_TIMEOUT_S)
                await self._answer(writer, body, Caller(None, host))
        except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass  # the client went away or was too slow: nothing to answer, nothing to keep
        except (LegacyError, ssl.SSLError, ValueError) as exc:
            # As the C++ daemons say "Error parsing message": once a minute per address and reason.
            if self._said((host, type(exc))):
                log.warning("a legacy request from %s was closed without an answer: %s", host, exc)
        finally:
            writer.close()

    async def _legacy_in_tls(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, hello: bytes
    ) -> None:
        assert self._tls is not None
        stream = TlsStream(reader, writer, self._tls.legacy_context(), hello)

        async def request() -> bytes:
            await stream.handshake()
            return await _body(stream, await stream.readexactly(FIRST))  # the ClientHello held no more

        body = await asyncio.wait_for(request(), READ_TIMEOUT_S)
        der = stream.peer_certificate()
        peer = peer_from_pem(ssl.DER_cert_to_PEM_cert(der).encode()) if der else None
        await self._answer(stream, body, Caller(peer, host))

    async def _answer(self, out: Union[asyncio.StreamWriter, TlsStream], body: bytes, caller: Caller) -> None:
        assert self._legacy is not None
        reply = legacy.frame(await self._legacy.answer(body, caller))
        if isinstance(out, TlsStream):
            await asyncio.wait_for(out.write(reply), WRITE_TIMEOUT_S)
        else:
            out.write(reply)
            await asyncio.wait_for(out.drain(), WRITE_TIMEOUT_S)

    def _arrived(self, arrival: Arrival) -> bool:
        """Whether a new connection may be read at all. Under mutual TLS every connection served is TLS:
        a sender over --tls-handshake-rate is closed before anything is read (a flood of them costs an
        accept and a close each); a plaintext daemon learns it from the first bytes (:meth:`_admitted`)."""
        return self._tls is None or self._tls_gate is None or self._tls_gate.admit(arrival)

    def _admitted(self, arrival: Arrival, start: Start, grpc: bool) -> bool:
        if start is not Start.TLS and self._tls is not None:  # it can never be served: closed at once
            self._refuse_plaintext(arrival.host, start)
            return False
        tls_gate = self._tls_gate if start is Start.TLS and self._tls is None else None
        gates = (tls_gate, None if grpc else self._legacy_gate)
        return all(gate is None or gate.admit(arrival) for gate in gates)

    def _sweep(self) -> None:
        census = self.census
        census.sweep()
        now = time.monotonic()
        if now - self._reported >= REPORT_EVERY_S and census.closed_any():
            self._reported = now
            _report(census.closed(), census.budget)
        if census.admitted - self._trimmed_at >= MEMORY_TRIM_AFTER and len(census) * 4 <= census.peak:
            memory.give_back()  # a flood's buffers, freed but kept by malloc
            census.reset_peak()
            self._trimmed_at = census.admitted
        self._sweeper = asyncio.get_running_loop().call_later(SWEEP_EVERY_S, self._sweep)

    def _refuse_plaintext(self, host: str, start: Start) -> None:
        if self._refused_plaintext((host, start)):
            log.warning(
                "refused a plaintext %s connection from %s: this daemon requires mutual TLS "
                "(%s: --certs-dir)",
                "gRPC" if start is Start.HTTP2 else "legacy JSON RPC",
                host,
                "dyno" if start is Start.HTTP2 else "msMonitor's dyno",
            )


def _report(closed: Closed, budget: int) -> None:
    """What the bounds closed in the last minute, in a line each (nothing when they closed nothing)."""
    for stage, count in closed.timed_out.items():
        timeout_s = BOUNDS[stage].timeout_s
        log.warning("closed %d connections %s for more than %g s", count, stage.value, timeout_s)
    for stage, count in closed.over_cap.items():
        bound = BOUNDS[stage]
        log.warning(
            "closed %d connections %s for newer ones: at most %d may be, %d from one source",
            count,
            stage.value,
            bound.total,
            bound.per_source,
        )
    full = f"the port holds the {budget} connections its share of the open files limit allows"
    for stage, count in closed.for_budget.items():
        log.warning("closed %d connections %s for newer ones: %s", count, stage.value, full)
    if closed.refused:
        log.warning("closed %d new connections at once: %s, all past their handshake", closed.refused, full)


async def _body(stream: Union[asyncio.StreamReader, TlsStream], already_read: bytes) -> bytes:
    """The request whose length starts *already_read* (which may hold some of the body too)."""
    size = legacy.length(already_read[:FIRST])
    if not 0 < size <= legacy.MAX_REQUEST:
        raise LegacyError(f"a request length of {size} bytes (1..{legacy.MAX_REQUEST} are served)")
    body = already_read[FIRST : FIRST + size]
    return body + await stream.readexactly(size - len(body)) if len(body) < size else body
