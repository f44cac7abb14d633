"""The plugin's daemon link against a stand-in daemon socket bound by the test (runs on Python 3.8 too)."""

import logging
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

from msmonitor_contract import wire
from msmonitor_plugin import identity
from msmonitor_plugin import link as link_module
from msmonitor_plugin.link import ABSENT_RETRY_S, MAX_HEARTBEAT_S, DaemonLink


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


def wait_blocked_in_the_kernel(thread):
    """Until *thread* sleeps in select() or poll(), as Linux's /proc tells; after 2 s, where /proc hides
    it, the test goes on less sharp. A stop() that comes while the thread is still on its way there
    would prove nothing about waking it."""
    path = f"/proc/self/task/{thread.native_id}/wchan"
    for _ in range(1000):
        try:
            with open(path) as f:
                where = f.read()
        except OSError:
            return
        if "poll" in where or "select" in where:
            return
        time.sleep(0.002)  # polling another thread's state, which signals nothing


class Records(logging.Handler):
    """The plugin's errors: a link thread that meets its sockets closed under it logs one."""

    def __init__(self, level=logging.ERROR):
        super().__init__(level)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


class LinkTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def start_link(self, step=7, make_hello=None, on_datagram=None):
        link = DaemonLink(self.dir.name, make_hello or (lambda: identity.hello(step, ["push"])), on_datagram)
        self.addCleanup(link.stop)
        link.start()
        return link

    def test_registers_heartbeats_at_the_daemons_pace_and_says_goodbye(self):
        daemon = FakeDaemonSocket(self.dir.name)
        self.addCleanup(daemon.close)
        daemon.sock.settimeout(60.0)  # a bound on a failure, not a figure: a loaded machine may be slow
        # At the pace before the ACK the next heartbeat would come in an hour: any that come are at the
        # daemon's pace, however slow the machine, so no upper bound on wall time is needed.
        old_pace = mock.patch.object(link_module, "MAX_HEARTBEAT_S", 3600.0)
        old_pace.start()
        self.addCleanup(old_pace.stop)
        link = self.start_link(step=7)
        hello, sender = daemon.receive()
        self.assertEqual(hello.type, wire.HELLO)
        registration = wire.Hello.from_payload(hello.payload)
        self.assertEqual(
            (registration.pid, registration.step, registration.capabilities), (os.getpid(), 7, ["push"])
        )
        self.assertEqual(registration.ancestors[0], os.getppid())
        self.assertEqual(oct(os.stat(sender).st_mode & 0o777), "0o600")

        begin = time.monotonic()
        daemon.sock.sendto(wire.encode(wire.ACK, wire.Ack(keepalive_s=0.6).to_payload()), sender)
        self.assertTrue(link.registered.wait(5))
        self.assertAlmostEqual(link.heartbeat_s, 0.2)
        for _ in range(3):  # the next heartbeats, at the new pace
            self.assertEqual(daemon.receive()[0].type, wire.HELLO)
        # At 0.2 s, three take 0.6 s at least (0.4 s should one have been queued before the ACK): paced,
        # not sent back to back. A lower bound only: load can make them later, never earlier.
        self.assertGreaterEqual(time.monotonic() - begin, 0.4)

        link.stop()
        while True:  # heartbeats may be queued before the goodbye
            datagram, _ = daemon.receive()
            if datagram.type == wire.BYE:
                break
        self.assertEqual(wire.Bye.from_payload(datagram.payload).pid, os.getpid())
        self.assertFalse(os.path.exists(sender), "the plugin's socket file is removed")

    def test_between_heartbeats_a_new_step_goes_as_a_step_report_and_a_new_state_as_a_hello(self):
        daemon = FakeDaemonSocket(self.dir.name)
        self.addCleanup(daemon.close)
        news = {"step": 7, "state": "off"}
        link = DaemonLink(
            self.dir.name,
            lambda: identity.hello(news["step"], ["push"], states=identity.States(service=news["state"])),
            news=lambda: (news["step"], news["state"]),
        )
        self.addCleanup(link.stop)
        link.start()
        hello, sender = daemon.receive()
        self.assertEqual(hello.type, wire.HELLO)
        ack = wire.Ack(keepalive_s=60.0, step_reports=True)  # heartbeats 5 s apart: news cannot wait
        daemon.sock.sendto(wire.encode(wire.ACK, ack.to_payload()), sender)
        self.assertTrue(link.registered.wait(5))
        news["step"] = 9
        report = daemon.receive()[0]
        self.assertEqual((report.type, wire.Step.from_payload(report.payload).step), (wire.STEP, 9))
        news["state"] = "on since 10:00:00, /data"
        while True:  # the step report may come first
            datagram = daemon.receive()[0]
            if datagram.type == wire.HELLO:
                break
        self.assertEqual(wire.Hello.from_payload(datagram.payload).service, news["state"])

    def test_no_daemon_is_not_an_error(self):
        attempts = threading.Semaphore(0)

        def make_hello():
            attempts.release()
            return identity.hello(0, [])

        before = set(threading.enumerate())
        link = self.start_link(make_hello=make_hello)
        (thread,) = set(threading.enumerate()) - before
        self.assertFalse(link.send(wire.HELLO, b"{}"))
        for _ in range(3):  # registering, then retrying after its back-off: the link lives on
            self.assertTrue(attempts.acquire(timeout=30))
        self.assertFalse(link.registered.is_set())
        link.stop()
        thread.join(10)
        self.assertFalse(thread.is_alive())

    def test_no_daemon_back_off_doubles_and_each_wait_is_jittered_from_the_links_own_random(self):
        # Not jittered, the processes of a node whose daemon is away would all try again at one instant.
        link = DaemonLink(self.dir.name, lambda: identity.hello(0, []), rng=random.Random(7))
        self.addCleanup(link.close)
        clock = mock.Mock(monotonic=mock.Mock(return_value=100.0))  # the link's clock, stood still
        waits = []

        def instead_of_waiting():  # the link thread's wait, recorded: when the next hello is due
            waits.append(link._next_hello - 100.0)
            link._stopping = len(waits) == 7

        link._receive_until_next_hello = instead_of_waiting
        random.seed(1)
        jobs_random = random.getstate()
        with mock.patch.object(link_module, "time", clock):
            link._serve()  # on this thread; every hello is refused (no daemon socket in the folder)
        self.assertEqual(random.getstate(), jobs_random, "the job's random module is not drawn on")
        same_seed, expected, seconds = random.Random(7), [], ABSENT_RETRY_S[0]
        for _ in range(7):
            expected.append(seconds * same_seed.uniform(0.5, 1.5))
            seconds = min(seconds * 2, ABSENT_RETRY_S[1])
        self.assertEqual([round(w, 9) for w in waits], [round(e, 9) for e in expected])

    def test_stop_wakes_a_link_waiting_for_its_next_heartbeat(self):
        daemon = FakeDaemonSocket(self.dir.name)
        self.addCleanup(daemon.close)
        before = set(threading.enumerate())
        link = self.start_link()
        (thread,) = set(threading.enumerate()) - before
        _, sender = daemon.receive()
        daemon.sock.sendto(wire.encode(wire.ACK, wire.Ack(keepalive_s=60).to_payload()), sender)
        self.assertTrue(link.registered.wait(5))
        self.assertEqual(link.heartbeat_s, MAX_HEARTBEAT_S)  # its next heartbeat is seconds away
        errors = Records()
        logging.getLogger("msmonitor_plugin").addHandler(errors)
        self.addCleanup(logging.getLogger("msmonitor_plugin").removeHandler, errors)
        wait_blocked_in_the_kernel(thread)
        link.stop()
        # Not woken, the thread would still wait for its heartbeat when stop() gives up on it (after 1 s).
        self.assertFalse(thread.is_alive(), "stop() woke the thread, which ended")
        self.assertEqual(errors.records, [])
        self.assertEqual(daemon.receive()[0].type, wire.BYE)

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
        handled, marker = [], threading.Event()

        def on_datagram(datagram):
            handled.append(datagram.type)
            if datagram.type == "mm.marker":
                marker.set()

        link = self.start_link(on_datagram=on_datagram)
        _, sender = daemon.receive()
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as impostor:
            impostor.sendto(wire.encode(wire.ACK, wire.Ack(keepalive_s=0.6).to_payload()), sender)
            impostor.sendto(wire.encode(wire.COMMAND, b"{}"), sender)
        # Queued behind the impostor's: once the link handled this, it has judged those.
        daemon.sock.sendto(wire.encode("mm.marker"), sender)
        self.assertTrue(marker.wait(5))
        self.assertFalse(link.registered.is_set(), "an ACK from another socket is not the daemon's")
        self.assertEqual(handled, ["mm.marker"], "a command from another socket is not the daemon's")

    def test_a_flood_from_another_socket_is_logged_once_with_its_count(self):
        daemon = FakeDaemonSocket(self.dir.name)
        self.addCleanup(daemon.close)
        warnings = Records(logging.WARNING)
        logger = logging.getLogger("msmonitor_plugin")
        logger.addHandler(warnings)
        self.addCleanup(logger.removeHandler, warnings)
        marker = threading.Event()
        self.start_link(on_datagram=lambda datagram: marker.set())
        _, sender = daemon.receive()
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as impostor:
            impostor.settimeout(5.0)  # the plugin's queue fills: wait for it to drain, never drop
            for _ in range(2000):
                impostor.sendto(wire.encode(wire.COMMAND, b"{}"), sender)
        daemon.sock.sendto(wire.encode("mm.marker"), sender)  # judged after every impostor's datagram
        self.assertTrue(marker.wait(10))
        dropped = [m for m in warnings.records if "did not come from dynolog" in m]
        self.assertEqual(len(dropped), 1, dropped[:3])
        self.assertIn(": 1 since the last such line", dropped[0])

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
        # Timed without the imports, which a loaded machine slows: an init that waited on the absent
        # daemon (for a reply, a retry, a heartbeat) would take 100 times the ~1 ms it does.
        code = (
            "import time, msmonitor_plugin as m, msmonitor_plugin.agent\n"
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
