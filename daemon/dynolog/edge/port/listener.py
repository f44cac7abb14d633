"""The port: each connection, once the doorway (:mod:`.doorway`) has its first bytes, relayed to gRPC
or answered in the legacy JSON RPC.

Every legacy connection is bounded: its request must arrive (TLS handshake included) within
:data:`READ_TIMEOUT_S`, its length must be 1..MAX_REQUEST, and the reply must be taken within
:data:`WRITE_TIMEOUT_S`; anything else is closed without a word, as the C++ daemons do. gRPC
connections are relayed for their whole life, untouched.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Optional, Set, Tuple, Union

from dynoproto import legacy
from dynoproto.legacy import LegacyError

from ...core.logs import Once
from ..auth import peer_from_pem
from ..legacy.service import Caller, LegacyService
from ..limits import Client, ClientLimiter
from ..tls import ServerTls
from .doorway import Doorway
from .relay import Peers, relay
from .sniff import FIRST, Sniffed, Start
from .tls_stream import TlsStream

log = logging.getLogger("dynolog.edge.port")

READ_TIMEOUT_S = 3.0  # msMonitor's daemon times a read out after 3 s
WRITE_TIMEOUT_S = 3.0
_GRPC_ALPN = "h2"
_LEGACY_CONNECTION = "a legacy JSON RPC connection"


class Port:
    """The listening socket in front of the gRPC server (on a loopback port of its own)."""

    def __init__(self, gate: Optional[ClientLimiter] = None) -> None:
        self.peers = Peers()  # made first: the gRPC server's limits resolve relayed clients with it
        # Legacy connections per address (--legacy-connection-rate): those over it are closed unread,
        # so a flood costs an accept and a close each, and gRPC clients on the port go on being served.
        self._gate = gate
        self._legacy: Optional[LegacyService] = None
        self._grpc_server = ("", 0)
        self._tls: Optional[ServerTls] = None
        self._doorway: Optional[Doorway] = None
        self._connections: Set[asyncio.Task[None]] = set()
        self._refused_plaintext = Once(period_s=float("inf"))  # once per address: it will not change
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
        self._legacy, self._grpc_server, self._tls = legacy_service, grpc_server, tls
        sock = socket.create_server(
            (host, port),
            family=socket.AF_INET6 if ":" in host else socket.AF_INET,
            dualstack_ipv6=host == "::",  # as gRPC listens on [::]: IPv4 clients too
            backlog=1024,
        )
        self._doorway = Doorway(sock, self._decided, READ_TIMEOUT_S)
        self._doorway.open()
        return int(sock.getsockname()[1])

    async def close(self) -> None:
        if self._doorway is not None:
            self._doorway.close()
            self._doorway = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    def _decided(self, sock: socket.socket, host: str, data: bytes, sniffed: Sniffed) -> None:
        """A connection that said what it speaks: relayed, answered, or closed at once."""
        grpc = sniffed.start is Start.HTTP2 or (
            # A plaintext daemon leaves TLS to gRPC to refuse, as it did before legacy clients came.
            sniffed.start is Start.TLS and (_GRPC_ALPN in sniffed.alpn or self._tls is None)
        )
        if not grpc:
            if sniffed.start is Start.LEGACY and self._tls is not None:
                self._refuse_plaintext(host)
                sock.close()
                return
            if not self._admitted(host):
                sock.close()
                return
        task = asyncio.get_running_loop().create_task(self._serve(sock, host, data, sniffed.start, grpc))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, sock: socket.socket, host: str, data: bytes, start: Start, grpc: bool) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=sock)
        except OSError:
            sock.close()
            return
        try:
            if grpc:
                await relay(reader, writer, data, self._grpc_server, self.peers)
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

    def _admitted(self, host: str) -> bool:
        if self._gate is None:
            return True
        return self._gate.admit(Client(f"legacy:{host}", f"at {host}"), _LEGACY_CONNECTION, False) is None

    def _refuse_plaintext(self, host: str) -> None:
        if self._refused_plaintext(host):
            log.warning(
                "refused a plaintext legacy JSON RPC connection from %s: this daemon requires mutual TLS "
                "(msMonitor's dyno: --certs-dir)",
                host,
            )


async def _body(stream: Union[asyncio.StreamReader, TlsStream], already_read: bytes) -> bytes:
    """The request whose length starts *already_read* (which may hold some of the body too)."""
    size = legacy.length(already_read[:FIRST])
    if not 0 < size <= legacy.MAX_REQUEST:
        raise LegacyError(f"a request length of {size} bytes (1..{legacy.MAX_REQUEST} are served)")
    body = already_read[FIRST : FIRST + size]
    return body + await stream.readexactly(size - len(body)) if len(body) < size else body
