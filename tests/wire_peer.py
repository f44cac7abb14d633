"""This test process speaking the plugin's wire by hand, for tests of what the daemon sends a plugin."""

from __future__ import annotations

import os
import socket
from typing import Sequence

from harness import Daemon
from msmonitor_contract import wire


class PluginPeer:
    """A plugin of this test process: a command read and dropped here is, to the daemon, a push lost in a
    full socket."""

    def __init__(self, daemon: Daemon, capabilities: Sequence[str] = ("push", "npumonitor")) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(daemon.socket_dir / "peer"))
        self.sock.settimeout(10)
        self.daemon_path = str(daemon.socket_dir / wire.DAEMON_ENDPOINT)
        self.capabilities = list(capabilities)

    def send(self, kind: str, payload: bytes) -> None:
        self.sock.sendto(wire.encode(kind, payload), self.daemon_path)

    def heartbeat(self) -> None:
        """A heartbeat (the plugin's hello), read up to the daemon's acknowledgement."""
        self.send(wire.HELLO, wire.Hello(pid=os.getpid(), capabilities=self.capabilities).to_payload())
        while self.next().type != wire.ACK:
            pass

    def next(self) -> wire.Datagram:
        return wire.decode(self.sock.recv(wire.MAX_DATAGRAM))

    def command(self) -> wire.Command:
        datagram = self.next()
        assert datagram.type == wire.COMMAND, datagram
        return wire.Command.from_payload(datagram.payload)

    def nothing_queued(self) -> bool:
        self.sock.setblocking(False)
        try:
            self.sock.recv(wire.MAX_DATAGRAM)
        except BlockingIOError:
            return True
        finally:
            self.sock.settimeout(10)
        return False
