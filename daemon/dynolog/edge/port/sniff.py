"""What a connection speaks, from its first bytes: the HTTP/2 preface (gRPC), a TLS ClientHello whose
ALPN offers ``h2`` (gRPC in TLS) or not (msMonitor's JSON RPC in TLS), else a legacy 4-byte length.

No legacy request can be mistaken: its length is below 8192, so its third and fourth bytes are small
or zero, while ``PRI `` and a TLS record header (0x16 0x03) read as lengths far above it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Tuple

FIRST = 4  # bytes read before deciding: a legacy length prefix, and enough of either other start
HTTP2_START = b"PRI "  # of the preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
MAX_CLIENT_HELLO = 1 << 14  # far above any real ClientHello (2 KiB with post-quantum key shares)
# Read before deciding: a real ClientHello fits even cut into one-byte records (6 bytes each: 12 KiB).
MAX_SNIFFED = 2 * MAX_CLIENT_HELLO
_HANDSHAKE_RECORD = 0x16
_CLIENT_HELLO = 1
_ALPN_EXTENSION = 0x0010


class Start(enum.Enum):
    HTTP2 = "http2"
    TLS = "tls"
    LEGACY = "legacy"


def start_of(first: bytes) -> Start:
    if first == HTTP2_START:
        return Start.HTTP2
    if first[0] == _HANDSHAKE_RECORD and first[1] == 3:
        return Start.TLS
    return Start.LEGACY


@dataclass(frozen=True)
class Sniffed:
    start: Start
    alpn: Tuple[str, ...] = ()  # what a TLS client offers


class Sniffer:
    """Reads a connection's first bytes as they arrive, each TLS record once: a ClientHello cut into
    thousands of one-byte records costs what its bytes cost, not what re-reading them all on every
    arrival would (quadratic). At most :data:`MAX_SNIFFED` bytes are read before deciding."""

    def __init__(self) -> None:
        self.data = bytearray()  # everything read, for whoever serves the connection
        self._next_record = 0
        self._handshake = bytearray()

    def feed(self, piece: bytes) -> Optional[Sniffed]:
        """What the connection speaks, once *piece* has come too; None until enough has arrived. Raises
        ValueError for a TLS start that is no well-formed ClientHello within the first bytes."""
        self.data += piece
        if len(self.data) < FIRST:
            return None
        start = start_of(bytes(self.data[:FIRST]))
        if start is not Start.TLS:
            return Sniffed(start)
        alpn = self._records()
        if alpn is not None:
            return Sniffed(start, alpn)
        if len(self.data) >= MAX_SNIFFED:  # empty or tiny records, say: a ClientHello never comes
            raise ValueError(f"no ClientHello in the first {len(self.data)} bytes")
        return None

    def _records(self) -> Optional[Tuple[str, ...]]:
        """The ALPN the ClientHello offers, once its last record is in; the complete records not yet
        read are read."""
        data, pos = self.data, self._next_record
        while len(data) >= pos + 5:
            if data[pos] != _HANDSHAKE_RECORD:
                raise ValueError("a TLS record other than a handshake came before the ClientHello")
            end = pos + 5 + int.from_bytes(data[pos + 3 : pos + 5], "big")
            if len(data) < end:
                break
            self._handshake += data[pos + 5 : end]
            pos = self._next_record = end
            hello = self._client_hello()
            if hello is not None:
                return _alpn(hello)
        return None

    def _client_hello(self) -> Optional[bytes]:
        handshake = self._handshake
        if len(handshake) < 4:
            return None
        if handshake[0] != _CLIENT_HELLO:
            raise ValueError("the first handshake message is not a ClientHello")
        need = 4 + int.from_bytes(handshake[1:4], "big")
        if need > MAX_CLIENT_HELLO:
            raise ValueError(f"a ClientHello of {need} bytes")
        return bytes(handshake[4:need]) if len(handshake) >= need else None


def _alpn(hello: bytes) -> Tuple[str, ...]:
    reader = _Reader(hello)
    reader.skip(2 + 32)  # legacy_version, random
    reader.skip(reader.number(1))  # legacy_session_id
    reader.skip(reader.number(2))  # cipher_suites
    reader.skip(reader.number(1))  # legacy_compression_methods
    if reader.done:
        return ()  # a ClientHello without extensions (TLS 1.2 and older may omit them)
    extensions = _Reader(reader.take(reader.number(2)))
    while not extensions.done:
        kind, body = extensions.number(2), extensions.take(extensions.number(2))
        if kind == _ALPN_EXTENSION:
            names = _Reader(body)
            names = _Reader(names.take(names.number(2)))
            protocols = []
            while not names.done:
                protocols.append(names.take(names.number(1)).decode("ascii", "replace"))
            return tuple(protocols)
    return ()


class _Reader:
    """Bounds-checked reads through a byte string: a short field is a ValueError, never an IndexError."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    @property
    def done(self) -> bool:
        return self._pos >= len(self._data)

    def take(self, count: int) -> bytes:
        end = self._pos + count
        if end > len(self._data):
            raise ValueError("a ClientHello field runs past its end")
        piece, self._pos = self._data[self._pos : end], end
        return piece

    def skip(self, count: int) -> None:
        self.take(count)

    def number(self, width: int) -> int:
        return int.from_bytes(self.take(width), "big")
