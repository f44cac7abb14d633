"""The port: accept, read the first bytes, and relay to gRPC or answer in the legacy JSON RPC.

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

from ..auth import peer_from_pem
from ..legacy.service import Caller, LegacyService
from ..limits import Client, ClientLimiter
from ..tls_reload import ServerTls
from .relay import Peers, relay
from .sniff import FIRST, MAX_CLIENT_HELLO, Start, client_hello_alpn, start_of
from .tls_stream import TlsStream

log = logging.getLogger("dynolog.port")

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
        self._server: Optional[asyncio.AbstractServer] = None
        self._connections: Set[asyncio.Task[None]] = set()
        self._refused_plaintext: Set[str] = set()

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
        self._server = await asyncio.start_server(self._accepted, sock=sock)
        return int(sock.getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass  # the client went away or was too slow: nothing to answer, nothing to keep
        except (LegacyError, ssl.SSLError, ValueError) as exc:
            log.debug("connection from %s closed: %s", _host(writer), exc)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await asyncio.wait_for(reader.readexactly(FIRST), READ_TIMEOUT_S)
        start = start_of(first)
        if start is Start.HTTP2:
            return await relay(reader, writer, first, self._grpc_server, self.peers)
        if start is Start.TLS:
            hello = await asyncio.wait_for(_client_hello(reader, first), READ_TIMEOUT_S)
            alpn = client_hello_alpn(hello) or ()
            if _GRPC_ALPN in alpn or self._tls is None:  # a plaintext daemon leaves TLS to gRPC to refuse
                return await relay(reader, writer, hello, self._grpc_server, self.peers)
            if self._admitted(writer):
                await self._legacy_in_tls(reader, writer, hello)
            return None
        if self._tls is not None:
            return self._refuse_plaintext(writer)
        if not self._admitted(writer):
            return None
        body = await asyncio.wait_for(_body(reader, first), READ_TIMEOUT_S)
        await self._answer(writer, body, Caller(None, _host(writer)))

    async def _legacy_in_tls(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: bytes
    ) -> None:
        assert self._tls is not None
        stream = TlsStream(reader, writer, self._tls.legacy_context(), hello)

        async def request() -> bytes:
            await stream.handshake()
            return await _body(stream, await stream.readexactly(FIRST))

        body = await asyncio.wait_for(request(), READ_TIMEOUT_S)
        der = stream.peer_certificate()
        peer = peer_from_pem(ssl.DER_cert_to_PEM_cert(der).encode()) if der else None
        await self._answer(stream, body, Caller(peer, _host(writer)))

    async def _answer(self, out: Union[asyncio.StreamWriter, TlsStream], body: bytes, caller: Caller) -> None:
        assert self._legacy is not None
        reply = legacy.frame(await self._legacy.answer(body, caller))
        if isinstance(out, TlsStream):
            await asyncio.wait_for(out.write(reply), WRITE_TIMEOUT_S)
        else:
            out.write(reply)
            await asyncio.wait_for(out.drain(), WRITE_TIMEOUT_S)

    def _admitted(self, writer: asyncio.StreamWriter) -> bool:
        if self._gate is None:
            return True
        host = _host(writer)
        return self._gate.admit(Client(f"legacy:{host}", f"at {host}"), _LEGACY_CONNECTION, False) is None

    def _refuse_plaintext(self, writer: asyncio.StreamWriter) -> None:
        host = _host(writer)
        if host not in self._refused_plaintext and len(self._refused_plaintext) < 4096:
            self._refused_plaintext.add(host)
            log.warning(
                "refused a plaintext legacy JSON RPC connection from %s: this daemon requires mutual TLS "
                "(msMonitor's dyno: --certs-dir)",
                host,
            )


async def _client_hello(reader: asyncio.StreamReader, first: bytes) -> bytes:
    """The bytes up to the end of the ClientHello (it may span records and reads)."""
    data = bytearray(first)
    while client_hello_alpn(bytes(data)) is None:
        if len(data) > MAX_CLIENT_HELLO + 64:
            raise ValueError("no ClientHello in the first 64 KiB")
        piece = await reader.read(MAX_CLIENT_HELLO)
        if not piece:
            raise asyncio.IncompleteReadError(bytes(data), None)
        data += piece
    return bytes(data)


async def _body(stream: Union[asyncio.StreamReader, TlsStream], prefix: bytes) -> bytes:
    size = legacy.length(prefix)
    if not 0 < size <= legacy.MAX_REQUEST:
        raise LegacyError(f"a request length of {size} bytes (1..{legacy.MAX_REQUEST} are served)")
    return await stream.readexactly(size)


def _host(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if peer else "?"
