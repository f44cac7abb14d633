"""Who holds the daemon's address, asked before the plugin says who it is (runs on Python 3.8 too).

Any local user can bind ``@dynolog@`` first; tests/test_squatter.py has such a squatter of another uid
against a real plugin process and daemon. Here: the check itself, and the link's answer to a holder of
a uid the daemon does not run as (``MSMONITOR_DAEMON_UIDS`` names another).
"""

import logging
import os
import socket
import tempfile
import time
import unittest
import uuid
from unittest import mock

from msmonitor_contract import holders, wire
from msmonitor_plugin import identity
from msmonitor_plugin.daemon_socket import UIDS_VARIABLE, DaemonSocket, Squatted, daemon_uids
from msmonitor_plugin.link import DaemonLink


def bound(address):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.setblocking(False)
    return sock


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


class HolderTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def test_the_kernel_names_the_holder_of_an_abstract_name_and_of_a_path(self):
        for address in (
            b"\0msmonitor-test-" + uuid.uuid4().hex.encode() + b"\0",
            os.path.join(self.dir.name, "d"),
        ):
            with bound(address) as sock:
                found = holders.holder(address)
                self.assertEqual(found.uid, os.getuid(), address)
                self.assertEqual(found.inode, os.fstat(sock.fileno()).st_ino)
                self.assertEqual(holders.with_pid(found).pid, os.getpid())
                self.assertEqual(holders.with_pid(found).describe(), f"uid {os.getuid()}, pid {os.getpid()}")

    def test_an_address_nobody_holds_is_an_error_as_for_a_send(self):
        for address in (
            b"\0msmonitor-test-" + uuid.uuid4().hex.encode() + b"\0",
            os.path.join(self.dir.name, "d"),
        ):
            with self.assertRaises(OSError):
                holders.holder(address)

    def test_an_unknown_holder_is_another_process(self):
        self.assertEqual(holders.Holder(None).describe(), "another process")
        self.assertEqual(holders.Holder(7, 99).describe(), "uid 7")

    def test_a_garbled_kernel_answer_tells_nothing(self):
        for answer in (b"", b"\x00" * 16, b"\xff" * 200):
            self.assertIsNone(holders._parse(answer, 7))


class DaemonUidsTest(unittest.TestCase):
    def test_this_user_and_root_unless_the_environment_lists_them(self):
        self.assertEqual(daemon_uids({}), {os.getuid(), 0})
        self.assertEqual(daemon_uids({UIDS_VARIABLE: "0, 1000"}), {0, 1000})
        self.assertEqual(daemon_uids({UIDS_VARIABLE: "x,\u00b2,-1"}), {os.getuid(), 0}, "no uid in it")


class DaemonSocketTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.address = os.path.join(self.dir.name, wire.DAEMON_ENDPOINT)

    def test_nothing_is_sent_to_a_holder_of_another_uid(self):
        with bound(self.address) as holder, DaemonSocket(
            self.address, uids=frozenset({os.getuid() + 4242})
        ) as sock:
            with self.assertRaises(Squatted) as raised:
                sock.send(wire.HELLO, b"{}")
            self.assertEqual(raised.exception.holder.uid, os.getuid())
            with self.assertRaises(BlockingIOError):
                holder.recv(wire.MAX_DATAGRAM)

    def test_the_daemons_uid_hears_it(self):
        with bound(self.address) as holder, DaemonSocket(self.address, uids=frozenset({os.getuid()})) as sock:
            sock.send(wire.HELLO, b"{}")
            self.assertEqual(wire.decode(holder.recv(wire.MAX_DATAGRAM)).type, wire.HELLO)
            self.assertFalse(sock.unverified)


class LinkTest(unittest.TestCase):
    def test_the_link_says_who_squats_once_sends_nothing_and_retries(self):
        with tempfile.TemporaryDirectory() as socket_dir, bound(
            os.path.join(socket_dir, "dynolog")
        ) as squatter:
            records = Records()
            logger = logging.getLogger("msmonitor_plugin")
            logger.addHandler(records)
            self.addCleanup(logger.removeHandler, records)
            with mock.patch.dict(os.environ, {UIDS_VARIABLE: str(os.getuid() + 4242)}):
                link = DaemonLink(socket_dir, lambda: identity.hello(0, []))
            link.start()
            try:
                deadline = time.monotonic() + 1.0  # the retries of 0.2, 0.4 s come within it
                while time.monotonic() < deadline:
                    with self.assertRaises(BlockingIOError, msg="the squatter heard from the plugin"):
                        squatter.recv(wire.MAX_DATAGRAM)
                    time.sleep(0.05)
            finally:
                link.stop()
            with self.assertRaises(BlockingIOError, msg="not even the goodbye"):
                squatter.recv(wire.MAX_DATAGRAM)
            holder = f"uid {os.getuid()}, pid {os.getpid()} holds dynolog's address"
            said = [line for line in records.records if holder in line]
            self.assertEqual(len(said), 1, records.records)
            self.assertFalse(link.registered.is_set())


if __name__ == "__main__":
    unittest.main()
