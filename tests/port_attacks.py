"""What a local user without a certificate can send the daemon's port (issue 34, items 1-3), for
tests/security/test_security_port.py and benchmarks/port_attacks.py: real TLS ClientHellos made by
Python's ssl, held, split into one-byte records, or sent from many loopback addresses."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import ssl
from typing import Iterator, List, Optional, Sequence

HANDSHAKE_RECORD = b"\x16\x03\x01"


def client_hello(alpn: Optional[Sequence[str]]) -> bytes:
    """The first flight of a real TLS client (Python's ssl), offering *alpn*."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if alpn:
        context.set_alpn_protocols(list(alpn))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def in_records_of(hello: bytes, size: int) -> bytes:
    """*hello*'s handshake message re-cut into TLS records of *size* bytes, as a TLS stack may (legally)
    send it; one byte each is the costliest for whoever reads it."""
    body = hello[5:]
    return b"".join(
        HANDSHAKE_RECORD + len(piece).to_bytes(2, "big") + piece
        for piece in (body[i : i + size] for i in range(0, len(body), size))
    )


def endless_client_hello(size: int) -> bytes:
    """*size* bytes of a ClientHello announced at 16 000 bytes whose body comes in one-byte records:
    every record is well formed, the message never completes within them."""
    start = HANDSHAKE_RECORD + b"\x00\x04" + b"\x01\x00\x3e\x80"
    return (start + (HANDSHAKE_RECORD + b"\x00\x01\x00") * (size // 6))[:size]


def loopback_source(i: int) -> str:
    """The *i*-th address of 127.0.0.0/8 after 127.0.0.1: every local user may send from any of them."""
    i += 2
    return f"127.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def connect(port: int, source: str = "", host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if source:
        sock.bind((source, 0))
    sock.settimeout(30)
    sock.connect((host, port))
    return sock


@contextlib.contextmanager
def held(port: int, count: int, first: bytes = b"", sources: int = 0) -> Iterator[List[socket.socket]]:
    """*count* connections that send *first* and then nothing, held until the block ends; from
    *sources* loopback addresses in turn (0: 127.0.0.1 alone). Stops early when this process runs out
    of descriptors or the kernel refuses more (what was opened is held); one the daemon resets at once
    is not held."""
    sockets: List[socket.socket] = []
    try:
        for i in range(count):
            try:
                sock = connect(port, loopback_source(i % sources) if sources else "")
            except ConnectionResetError:
                continue
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL):
                    break
                raise
            sockets.append(sock)
            if first:
                with contextlib.suppress(OSError):  # the daemon may have closed it already: it is held
                    sock.sendall(first)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the far end closed *sock* within *timeout* seconds (whatever it sent before)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(1 << 16):
            pass
    except socket.timeout:
        return False
    except OSError:
        return True  # reset
    return True


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for {pid}")
