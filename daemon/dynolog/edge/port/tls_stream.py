"""TLS over a connection whose first bytes were already read (to tell the protocols apart): an
``ssl.SSLObject`` on memory buffers, fed those bytes first and then the socket's, on the event loop."""

from __future__ import annotations

import asyncio
import ssl
from typing import Callable, Optional, TypeVar

_T = TypeVar("_T")
_RECORD = 1 << 14


class TlsStream:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        context: ssl.SSLContext,
        already_read: bytes,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._incoming.write(already_read)

    async def handshake(self) -> None:
        """Raises ssl.SSLError (a bad or missing client certificate, ...) or ConnectionError."""
        await self._run(self._tls.do_handshake)

    def peer_certificate(self) -> Optional[bytes]:
        """The verified client certificate, DER."""
        return self._tls.getpeercert(binary_form=True)

    async def readexactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            wanted = count - len(data)
            piece = await self._run(lambda: self._tls.read(wanted))  # noqa: B023 (called at once)
            if not piece:
                raise asyncio.IncompleteReadError(bytes(data), count)
            data += piece
        return bytes(data)

    async def write(self, data: bytes) -> None:
        await self._run(lambda: self._tls.write(data))

    async def _run(self, operation: Callable[[], _T]) -> _T:
        """*operation* retried as the peer's bytes arrive; what it produced for the peer sent."""
        while True:
            try:
                result = operation()
            except ssl.SSLWantReadError:
                await self._flush()
                received = await self._reader.read(_RECORD)
                if received:
                    self._incoming.write(received)
                else:
                    self._incoming.write_eof()
                continue
            except ssl.SSLZeroReturnError:  # the peer closed the TLS session
                raise ConnectionResetError("the client closed the TLS session") from None
            await self._flush()
            return result

    async def _flush(self) -> None:
        pending = self._outgoing.read()
        if pending:
            self._writer.write(pending)
            await self._writer.drain()
