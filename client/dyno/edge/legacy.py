"""Talking to a C++ dynolog or msMonitor daemon, for hosts that speak nothing but their JSON RPC
(a fleet part-way through moving to this project's daemon).

``dyno`` always asks in gRPC first: a daemon of this project answers it, and costs nothing more. Only a
gRPC failure that says something listens but does not speak gRPC (:func:`suspect`) leads here: the
connection is closed (the stock server serves one connection at a time, and reads a gRPC preface's
``PRI `` as a 541 MB length), and a legacy ``getStatus`` is sent. A host that answers it is a
:class:`LegacyHost`: its reply says which daemon it is, and what ``dyno`` may ask it. One request per
connection, plaintext or, as msMonitor's dyno does it, in mutual TLS from ``--certs-dir`` (no ALPN).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional

from dynoproto import legacy as wire

from ..exits import EXIT_FAILED, CliError
from ..fleet.target import Target

MSMONITOR, DYNOLOG = "msMonitor", "dynolog"
# What gRPC says when the connection was made and then failed the way a legacy server fails it:
# msMonitor's resets a connection whose length (the preface's "PRI ") is over its cap; the stock one
# reads that length and waits for the rest, so no HTTP/2 SETTINGS frame ever comes; in TLS, msMonitor's
# completes the handshake without ALPN. "Connection refused" or a certificate problem means no.
_PLAINTEXT_SIGNS = ("Connection reset by peer", "Socket closed", "timed out before receiving SETTINGS frame")
_TLS_SIGNS = ("missing selected ALPN property",)


def suspect(target: Target, detail: str) -> bool:
    """Whether a gRPC UNAVAILABLE with *detail* may have come from a legacy daemon."""
    return any(sign in detail for sign in (_TLS_SIGNS if target.tls else _PLAINTEXT_SIGNS))


@dataclass(frozen=True)
class LegacyHost:
    """A host whose daemon answered a legacy ``getStatus``; every later call shares its *deadline*
    (one ``--timeout`` for the whole legacy conversation)."""

    target: Target
    status: Dict[str, Any]  # its getStatus reply, as it gave it
    deadline: float  # time.monotonic()
    context: Optional[ssl.SSLContext] = None  # mutual TLS (--certs-dir), None for plaintext

    @property
    def flavor(self) -> str:
        """msMonitor's getStatus names its trace and monitor states; the stock one is ``{"status":1}``."""
        return MSMONITOR if "nputrace" in self.status else DYNOLOG

    def call(self, body: bytes) -> Dict[str, Any]:
        return call(self.target, body, self.deadline, self.context)

    def refusal(self, feature: str, needs: str = "this project's daemon") -> CliError:
        """What a host says when it is asked for what its daemon cannot do (exit 1 for that host)."""
        return CliError(
            f"{self.target.label} is a C++ {self.flavor} daemon (legacy JSON RPC): {feature} needs {needs}",
            EXIT_FAILED,
        )


def probe(target: Target, deadline: float, context: Optional[ssl.SSLContext]) -> Optional[LegacyHost]:
    """The host as a legacy daemon, or None when it does not answer a legacy getStatus by *deadline*."""
    try:
        status = call(target, wire.call(wire.GET_STATUS), deadline, context)
    except (OSError, wire.LegacyError):  # ssl.SSLError and socket.timeout are OSErrors
        return None
    if "status" in status and "nputrace" in status:
        # This project's daemon answers both CLIs at once: its gRPC was slow, it is not a C++ one.
        return None
    return LegacyHost(target, status, deadline, context)


def call(
    target: Target, body: bytes, deadline: float, context: Optional[ssl.SSLContext] = None
) -> Dict[str, Any]:
    """One request and its reply (a JSON object). OSError when the connection fails or the time is up,
    LegacyError when the reply is not a framed JSON object."""
    with socket.create_connection((target.hostname, target.port), _remaining(deadline)) as raw:
        sock = context.wrap_socket(raw, server_hostname=target.hostname) if context else raw
        with sock:
            # The prefix and the body in two writes (two TLS records), as both CLIs send them.
            sock.sendall(wire.LENGTH.pack(len(body)))
            sock.sendall(body)
            size = wire.length(_read(sock, wire.LENGTH.size, deadline))
            if not 0 < size <= wire.MAX_REPLY:
                raise wire.LegacyError(f"a reply of {size} bytes")
            return _object(_read(sock, size, deadline))


def _read(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = b""
    while len(data) < size:
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise wire.LegacyError(f"the reply ended after {len(data)} of {size} bytes")
        data += chunk
    return data


def _object(body: bytes) -> Dict[str, Any]:
    try:
        reply = json.loads(body.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise wire.LegacyError(f"a reply that is not JSON: {exc}") from None
    if not isinstance(reply, dict):
        raise wire.LegacyError("a reply that is not a JSON object")
    return reply


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("--timeout passed")
    return left
