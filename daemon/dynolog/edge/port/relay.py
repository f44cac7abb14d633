"""A client's connection relayed, byte for byte, to the gRPC server behind the port.

gRPC then sees the relay's local connection; :class:`Peers` remembers whose each one is, so rate
limits and logs still name the client's own address. A TLS connection's :class:`Handshake` says when it
is past its handshake, which gRPC does not tell.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

from msmonitor_contract.numbers import strict_int

from .census import Stage

_CHUNK = 1 << 16
_APPLICATION_DATA = 0x17
_RECORD_HEADER = 5

Seen = Callable[[bytes], None]


class Peers:
    """The client behind each relayed connection, by the relay's local port."""

    def __init__(self) -> None:
        self._by_port: Dict[int, str] = {}

    def add(self, port: int, peer: str) -> None:
        self._by_port[port] = peer

    def remove(self, port: int) -> None:
        self._by_port.pop(port, None)

    def address(self, grpc_peer: str) -> str:
        """gRPC's peer string of a relayed connection (``ipv4:127.0.0.1:PORT``) as the client's own."""
        port = strict_int(grpc_peer.rpartition(":")[2])
        return grpc_peer if port is None else self._by_port.get(port, grpc_peer)


class Handshake:
    """How far a relayed TLS connection's handshake has come, told from the outside by who spoke last
    and the client's record headers, for *advance*: finishing once the client answers the server's
    first flight; served once the server speaks after a whole encrypted record the client sent after
    that flight. In TLS 1.3 that record carries the client's Finished (its certificate and proof before
    it): a server speaks after it only to go on (its application's first bytes) or to end (an alert,
    then it closes). In TLS 1.2 it is the client's first application data, after both Finished. What the
    client sent before the server spoke counts for nothing: an encrypted record can come only after."""

    def __init__(self, advance: Callable[[Stage], None]) -> None:
        self._advance = advance
        self._server_spoke = False
        self._finishing = False
        self._answered = False  # a whole encrypted record came from the client after the server spoke
        self._header = bytearray()
        self._record_left = 0  # bytes of the client's current record still to come
        self._record_counts = False  # the current record began after the server spoke
        self._record_encrypted = False
        self.finished = False

    def from_client(self, data: bytes) -> None:
        if self._server_spoke and not self._finishing:
            self._finishing = True
            self._advance(Stage.FINISHING)
        pos = 0
        while pos < len(data) and not self._answered:
            if self._record_left:
                step = min(self._record_left, len(data) - pos)
                self._record_left -= step
                pos += step
                self._answered = self._record_left == 0 and self._record_counts and self._record_encrypted
                continue
            piece = data[pos : pos + _RECORD_HEADER - len(self._header)]
            self._header += piece
            pos += len(piece)
            if len(self._header) == _RECORD_HEADER:
                self._record_counts = self._server_spoke
                self._record_encrypted = self._header[0] == _APPLICATION_DATA
                self._record_left = int.from_bytes(self._header[3:5], "big")
                self._header.clear()

    def from_server(self, _: bytes) -> None:
        self._server_spoke = True
        if self._answered and not self.finished:
            self.finished = True
            self._advance(Stage.SERVED)


@dataclass(frozen=True)
class Behind:
    """The gRPC server behind the port, and whose each of its connections is."""

    address: Tuple[str, int]
    peers: Peers


async def relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    already_read: bytes,
    behind: Behind,
    handshake: Optional[Handshake] = None,
) -> None:
    """Until both sides have closed; either side's error closes both."""
    server_reader, server_writer = await asyncio.open_connection(*behind.address)
    port = server_writer.get_extra_info("sockname")[1]
    peers = behind.peers
    peers.add(port, _grpc_peer(writer))
    try:
        server_writer.write(already_read)
        if handshake is None:
            pumps = (_pump(reader, server_writer), _pump(server_reader, writer))
        else:
            handshake.from_client(already_read)
            pumps = (
                _pump(reader, server_writer, handshake.from_client),
                _pump(server_reader, writer, handshake.from_server),
            )
        await asyncio.gather(*pumps)
    finally:
        peers.remove(port)
        server_writer.close()


async def _pump(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, seen: Optional[Seen] = None
) -> None:
    try:
        while True:
            data = await source.read(_CHUNK)
            if not data:
                break
            if seen is not None:
                seen(data)
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():  # half-close: the other direction may still carry the last answer
            sink.write_eof()
    except (ConnectionError, OSError):
        sink.transport.abort()  # the other pump reads from that connection, and so ends too


def _grpc_peer(writer: asyncio.StreamWriter) -> str:
    """The client's address as gRPC writes a peer (``ipv4:10.0.0.7:51234``, ``ipv6:[::1]:51234``)."""
    host, port = writer.get_extra_info("peername")[:2]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
