"""A client's connection relayed, byte for byte, to the gRPC server behind the port.

gRPC then sees the relay's local connection; :class:`Peers` remembers whose each one is, so rate
limits and logs still name the client's own address.
"""

from __future__ import annotations

import asyncio
from typing import Dict, Tuple

from msmonitor_contract.numbers import strict_int

_CHUNK = 1 << 16


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


async def relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    already_read: bytes,
    server: Tuple[str, int],
    peers: Peers,
) -> None:
    """Until both sides have closed; either side's error closes both."""
    server_reader, server_writer = await asyncio.open_connection(*server)
    port = server_writer.get_extra_info("sockname")[1]
    peers.add(port, _grpc_peer(writer))
    try:
        server_writer.write(already_read)
        await asyncio.gather(_pump(reader, server_writer), _pump(server_reader, writer))
    finally:
        peers.remove(port)
        server_writer.close()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await source.read(_CHUNK)
            if not data:
                break
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
