"""Who a connection's sender is, for the port's bounds: what one sender cannot cheaply multiply.

A remote sender is its address (a host holds a whole IPv6 /64: its /64). A local sender can send from
any address of 127.0.0.0/8, so a loopback connection is its user instead: the uid the kernel attests
for the client's own socket (``NETLINK_SOCK_DIAG``, the inet answer's ``idiag_uid``: the uid that
created the socket, which no process can change), one lookup of a few microseconds. So one local user
flooding the port meets its own bounds, and every other user's connections are another source. Where
the kernel does not answer (netlink filtered, a client in another network namespace), all of loopback
is one source.
"""

from __future__ import annotations

import enum
import ipaddress
import logging
import socket
import struct
from typing import Optional, Tuple, Union

log = logging.getLogger("dynolog.edge.port")

LOOPBACK = "loopback"

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLH = struct.Struct("=IHHII")  # struct nlmsghdr
_REQUEST = struct.Struct("=BBBBI")  # inet_diag_req_v2: family, protocol, ext, pad, states
_PORTS = struct.Struct("!HH")  # inet_diag_sockid: sport, dport (network order), then the addresses
_TAIL = struct.Struct("=III")  # inet_diag_sockid: interface, cookie (none: all ones)
_UID_AT = _NLH.size + 4 + 48 + 12  # inet_diag_msg: 4 bytes, the sockid, expires, rqueue, wqueue, uid
_ALL_STATES = 0xFFFFFFFF
_STATE_AT = _NLH.size + 1  # inet_diag_msg: family, state
_CLOSED_STATES = (6, 7)  # TCP_TIME_WAIT, TCP_CLOSE


class _Client(enum.Enum):
    GONE = "gone"  # its end is closed


_GONE = _Client.GONE

_MAPPED = "::ffff:"


def local_user(uid: int) -> str:
    return f"local uid {uid}"


class Sources:
    """One netlink socket for the uid lookups, opened at the first (and kept: a lookup is one round
    trip to the kernel, on the event loop)."""

    def __init__(self) -> None:
        self._diag: Optional[socket.socket] = None
        self._unavailable = False
        self._sequence = 0

    def of(self, sock: socket.socket, peer: Tuple[str, int]) -> Optional[str]:
        """The source of accepted connection *sock* from *peer* (what accept returned); None when its
        client's end is closed already (nothing to serve, and a closed socket's owner reads as root). On
        the path of every connection a flood opens: text compared, no address parsed, for a loopback one."""
        host = _unmapped(peer[0])
        if not (host.startswith("127.") or host == "::1"):
            return remote_source(host)
        try:
            local = sock.getsockname()
        except OSError:
            return None
        owner = self._owner(host, peer[1], _unmapped(local[0]), local[1])
        if owner is _GONE:
            return None
        return local_user(owner) if isinstance(owner, int) else LOOPBACK

    def close(self) -> None:
        if self._diag is not None:
            self._diag.close()
            self._diag = None

    def _owner(
        self, client: str, client_port: int, server: str, server_port: int
    ) -> Union[int, _Client, None]:
        """The uid owning the client's end of a loopback connection between the two addresses; _GONE
        where it is closed (no such socket, or TIME_WAIT's, which reads uid 0); None where the kernel
        does not say."""
        diag = self._socket()
        if diag is None:
            return None
        family = socket.AF_INET6 if ":" in client else socket.AF_INET
        try:
            addresses = socket.inet_pton(family, client).ljust(16, b"\0") + socket.inet_pton(
                family, server
            ).ljust(16, b"\0")
        except OSError:  # a v4 client of a v6 listener not written as mapped: never by accept
            return None
        request = (
            _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES)
            + _PORTS.pack(client_port, server_port)
            + addresses
            + _TAIL.pack(0, 0xFFFFFFFF, 0xFFFFFFFF)
        )
        self._sequence = sequence = (self._sequence + 1) & 0xFFFFFFFF
        header = _NLH.pack(_NLH.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, sequence, 0)
        try:
            diag.send(header + request)
            answer = self._answer(diag, sequence)
        except OSError:
            return None
        if answer is None:
            return None
        if _NLH.unpack_from(answer)[1] != _SOCK_DIAG_BY_FAMILY:
            return _GONE  # NLMSG_ERROR: no such socket (loopback is this network namespace's)
        if len(answer) < _UID_AT + 4 or answer[_STATE_AT] in _CLOSED_STATES:
            return _GONE
        return int(struct.unpack_from("=I", answer, _UID_AT)[0])

    @staticmethod
    def _answer(diag: socket.socket, sequence: int) -> Optional[bytes]:
        """The kernel's answer to request *sequence*: one left by a lookup that timed out is skipped."""
        for _ in range(4):
            answer = diag.recv(8192)
            if len(answer) >= _NLH.size and _NLH.unpack_from(answer)[3] == sequence:
                return answer
        return None

    def _socket(self) -> Optional[socket.socket]:
        if self._diag is None and not self._unavailable:
            try:
                self._diag = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG)
                self._diag.settimeout(1.0)  # the kernel answers within the send; a bound, never a wait
            except (OSError, AttributeError) as exc:
                self._unavailable = True
                log.info("local senders are told apart by address only: no sock_diag here (%s)", exc)
        return self._diag


def remote_source(host: str) -> str:
    """An IPv4 address itself, an IPv6 one its /64."""
    if ":" not in host:
        return host
    try:
        return str(ipaddress.IPv6Network((host.partition("%")[0], 64), strict=False))
    except ValueError:
        return host


def _unmapped(host: str) -> str:
    """An IPv4-mapped IPv6 address (a dual-stack port's IPv4 clients) as its IPv4."""
    return host[len(_MAPPED) :] if host.startswith(_MAPPED) and "." in host else host
