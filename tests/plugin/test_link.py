"""The plugin's daemon link against a stand-in daemon socket bound by the test (runs on Python 3.8 too)."""

import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from msmonitor_plugin import identity, wire
from msmonitor_plugin.link import DaemonLink


class FakeDaemonSocket:
    """The daemon's end of the IPC, driven by the test: receive what the plugin sends, answer."""

    def __init__(self, socket_dir):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(os.path.join(socket_dir, wire.DAEMON_ENDPOINT))
        self.sock.settimeout(5.0)

    def receive(self):
        data, sender = self.sock.recvfrom(wire.MAX_DATAGRAM)
        return wire.decode(data), sender

    def close(self):
        self.sock.close()


class LinkTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def start_link(self, step=7):
        link = DaemonLink(self.dir.name, lambda: identity.hello(step, ["push"]))
        self.addCleanup(link.stop)
        link.start()
        return link

    def test_registers_heartbeats_at_the_daemons_pace_and_says_goodbye(self):
        daemon = FakeDaemonSocket(self.dir.name)
        self.addCleanup(daemon.close)
        link = self.start_link(step=7)
        hello, sender = daemon.receive()
        self.assertEqual(hello.type, wire.HELLO)
        registration = wire.Hello.from_payload(hello.payload)
        self.assertEqual(
            (registration.pid, registration.step, registration.capabilities), (os.getpid(), 7, ["push"])
        )
        self.assertEqual(registration.ancestors[0], os.getppid())
        self.assertEqual(oct(os.stat(sender).st_mode & 0o777), "0o600")

        daemon.sock.sendto(wire.encode(wire.ACK, wire.Ack(keepalive_s=0.6).to_payload()), sender)
        self.assertTrue(link.registered.wait(5))
        self.assertAlmostEqual(link.heartbeat_s, 0.2)
        begin = time.monotonic()
        self.assertEqual(daemon.receive()[0].type, wire.HELLO)  # the next heartbeat, at the new pace
        self.assertLess(time.monotonic() - begin, 2.0)

        link.stop()
        while True:  # heartbeats may be queued before the goodbye
            datagram, _ = daemon.receive()
            if datagram.type == wire.BYE:
                break
        self.assertEqual(wire.Bye.from_payload(datagram.payload).pid, os.getpid())
        self.assertFalse(os.path.exists(sender), "the plugin's socket file is removed")

    def test_no_daemon_is_not_an_error(self):
        link = self.start_link()
        self.assertFalse(link.send(wire.HELLO, b"{}"))
        self.assertFalse(link.registered.wait(0.3))
        begin = time.monotonic()
        link.stop()
        self.assertLess(time.monotonic() - begin, 1.5)

    def test_a_message_the_daemon_could_not_take_arrives_after_registering_again(self):
        link = self.start_link()
        link.send_reliably(wire.EVENT, b'{"trace_id": "1", "phase": "finished"}')  # nobody there yet
        daemon = FakeDaemonSocket(self.dir.name)
        self.addCleanup(daemon.close)
        hello, sender = daemon.receive()
        self.assertEqual(hello.type, wire.HELLO, "a new daemon must learn who we are before the event")
        daemon.sock.sendto(wire.encode(wire.ACK, wire.Ack(keepalive_s=60).to_payload()), sender)
        while True:
            datagram, _ = daemon.receive()
            if datagram.type == wire.EVENT:
                break
        self.assertEqual(wire.TraceEvent.from_payload(datagram.payload).phase, "finished")

    def test_datagrams_not_from_the_daemon_are_ignored(self):
        daemon = FakeDaemonSocket(self.dir.name)
        self.addCleanup(daemon.close)
        link = self.start_link()
        _, sender = daemon.receive()
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as impostor:
            impostor.sendto(wire.encode(wire.ACK, wire.Ack(keepalive_s=0.6).to_payload()), sender)
        self.assertFalse(link.registered.wait(0.5), "an ACK from another socket is not the daemon's")

    def test_garbage_from_the_daemon_is_dropped_and_the_link_lives_on(self):
        daemon = FakeDaemonSocket(self.dir.name)
        self.addCleanup(daemon.close)
        link = self.start_link()
        _, sender = daemon.receive()
        for garbage in (
            b"",
            b"\x01" * 10,
            wire.encode(wire.ACK, b"not json"),
            wire.encode("mm.unknown", b"{}"),
        ):
            daemon.sock.sendto(garbage, sender)
        daemon.sock.sendto(wire.encode(wire.ACK, wire.Ack(keepalive_s=0.6).to_payload()), sender)
        self.assertTrue(link.registered.wait(5))


class InitInAProcess(unittest.TestCase):
    def test_init_without_a_daemon_never_blocks_or_raises(self):
        code = (
            "import time, msmonitor_plugin as m\n"
            "t = time.monotonic(); ok = m.init(); m.step(); m.step()\n"
            "assert ok and m.is_active() and m.current_step() == 2, (ok, m.current_step())\n"
            "print(round(time.monotonic() - t, 3))\n"
        )
        with tempfile.TemporaryDirectory() as empty:
            env = dict(os.environ, KINETO_IPC_SOCKET_DIR=empty, PYTHONPATH=_plugin_path())
            env.pop("MSMONITOR_USE_DAEMON", None)
            out = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
            )
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertLess(float(out.stdout), 0.5)


def _plugin_path():
    import msmonitor_plugin

    return os.path.dirname(os.path.dirname(msmonitor_plugin.__file__))


if __name__ == "__main__":
    unittest.main()
