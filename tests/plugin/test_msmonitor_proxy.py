"""IPCMonitor.PyDynamicMonitorProxy against a stand-in msMonitor daemon socket (runs on Python 3.8 too)."""

import json
import os
import socket
import tempfile
import threading
import time
import unittest
from unittest import mock

from IPCMonitor import PyDynamicMonitorProxy
from msmonitor_contract import wire
from msmonitor_plugin.msmonitor_proxy import POLL_INTERVAL_S, POLL_WAIT_S, _Channel


class ProxyTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.env = mock.patch.dict(
            os.environ, {"MSMONITOR_IPC_SOCKET_DIR": self.dir.name, "SLURM_JOB_ID": "77"}
        )
        self.env.start()
        self.addCleanup(self.env.stop)
        PyDynamicMonitorProxy._instance = None  # each test its own singleton
        self.proxy = PyDynamicMonitorProxy()
        self.addCleanup(self.proxy.finalize_dyno)
        self.daemon = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.daemon.bind(os.path.join(self.dir.name, wire.MSMONITOR_CONTROL_SOCKET))
        self.daemon.settimeout(5)
        self.addCleanup(self.daemon.close)

    def receive(self, msg_type):
        while True:
            data, sender = self.daemon.recvfrom(wire.MAX_DATAGRAM)
            datagram = wire.decode(data)
            if datagram.type == msg_type:
                return datagram, sender

    def test_is_a_singleton(self):
        self.assertIs(PyDynamicMonitorProxy(), self.proxy)

    def test_init_registers_with_ctxt_and_reports_idle(self):
        self.assertTrue(self.proxy.init_dyno(3))
        ctxt, sender = self.receive(wire.CTXT)
        self.assertEqual(wire.KinetoContext.unpack(ctxt.payload), wire.KinetoContext(3, os.getpid(), 77))
        # msMonitor's client name, as a file in the socket folder: the daemon may sit in another netns.
        self.assertEqual(os.path.dirname(sender), self.dir.name)
        self.assertTrue(os.path.basename(sender).startswith("dynoconfigclient"), sender)
        status = wire.NpuStatus.unpack(self.receive(wire.NPU_TRACE_STATUS)[0].payload)
        self.assertEqual((status.status, status.pid), (0, os.getpid()))

    def test_without_a_socket_folder_the_client_name_is_abstract_as_msmonitors(self):
        channel = _Channel({"HOME": self.dir.name})
        self.addCleanup(channel.close)
        self.assertTrue(channel.address.startswith(b"\0dynoconfigclient"), channel.address)
        self.assertEqual(channel.daemon, os.path.join(self.dir.name, wire.MSMONITOR_CONTROL_SOCKET))

    def test_poll_returns_the_config_and_skips_other_replies(self):
        self.proxy.init_dyno(0)
        _, sender = self.receive(wire.CTXT)
        self.daemon.sendto(
            wire.encode(wire.CTXT, wire.pack_context_reply(1)), sender
        )  # late registration reply
        self.daemon.sendto(wire.encode(wire.ACK, b"{}"), sender)
        text = b"NPU_MONITOR_START=true\nREPORT_INTERVAL_S=10\n"
        self.daemon.sendto(wire.encode(wire.REQ, text), sender)
        self.assertEqual(self.proxy.poll_dyno(), text.decode())
        request = wire.KinetoRequest.unpack(self.receive(wire.REQ)[0].payload)
        self.assertEqual((request.config_type, request.job_id, request.pids[0]), (3, 77, os.getpid()))

    def test_poll_without_an_answer_returns_empty_after_the_wait(self):
        self.proxy.init_dyno(0)
        self.receive(wire.CTXT)
        returned = threading.Event()

        def answer_late():  # only once the poll gave up, or after 10 s if it never does
            _, address = self.receive(wire.REQ)
            returned.wait(10)
            self.daemon.sendto(wire.encode(wire.REQ, b"NPU_MONITOR_START=true\n"), address)

        daemon = threading.Thread(target=answer_late, daemon=True)
        daemon.start()
        begin = time.monotonic()
        self.assertEqual(self.proxy.poll_dyno(), "", "it gave up before the answer came")
        elapsed = time.monotonic() - begin
        returned.set()
        daemon.join(10)
        self.assertGreaterEqual(elapsed, POLL_WAIT_S, "it waited for an answer first")

    def test_a_caller_that_polls_again_at_once_is_paced(self):
        """MindSpore's helper loops on poll_dyno without sleeping: each answer comes at once, empty."""
        self.proxy.init_dyno(0)
        self.receive(wire.CTXT)
        stop = threading.Event()

        def answer_every_req():  # as this project's daemon does: at once
            while not stop.is_set():
                try:
                    _, address = self.receive(wire.REQ)
                    self.daemon.sendto(wire.encode(wire.REQ, b""), address)
                except OSError:  # a timeout, or the socket closed when the test ended
                    return

        daemon = threading.Thread(target=answer_every_req, daemon=True)
        daemon.start()
        self.addCleanup(stop.set)
        begin = time.monotonic()
        polls = 20
        for _ in range(polls):
            self.assertEqual(self.proxy.poll_dyno(), "")
        self.assertGreaterEqual(time.monotonic() - begin, (polls - 1) * POLL_INTERVAL_S)

    def test_no_daemon_at_all_is_not_an_error(self):
        self.daemon.close()
        os.unlink(os.path.join(self.dir.name, wire.MSMONITOR_CONTROL_SOCKET))
        self.assertTrue(self.proxy.init_dyno(0), "later polls register it when a daemon comes")
        self.assertEqual(self.proxy.poll_dyno(), "")

    def test_profiler_status_values_as_strings(self):
        self.proxy.init_dyno(0)
        self.receive(wire.NPU_MONITOR_STATUS)
        self.proxy.update_profiler_status(
            {"profiler_status": "2", "current_step": "9", "start_step": "10", "stop_step": "12"}
        )
        while True:
            status = wire.NpuStatus.unpack(self.receive(wire.NPU_TRACE_STATUS)[0].payload)
            if status.status == 2:
                break
        self.assertEqual((status.current_step, status.start_step, status.stop_step), (9, 10, 12))
        self.proxy.update_profiler_status({"profiler_status": "not a number"})  # ignored, never raised

    def test_uninitialized_reports_both_states(self):
        self.proxy.init_dyno(0)
        self.proxy.update_profiler_status({"profiler_status": "-1"})
        monitor = [
            wire.NpuStatus.unpack(self.receive(wire.NPU_MONITOR_STATUS)[0].payload).status for _ in range(2)
        ]
        self.assertEqual(monitor, [0, -1])


class DataGoldenBytes(unittest.TestCase):
    def test_data_message_is_json_after_the_header(self):
        payload = json.dumps({"kind": "Kernel", "deviceId": 0, "duration": 1500, "timestamp": 17}).encode()
        data = wire.encode(wire.DATA, payload)
        self.assertEqual(data[:40], len(payload).to_bytes(8, "little") + b"data".ljust(32, b"\0"))
        self.assertEqual(wire.decode(data), wire.Datagram("data", payload))


if __name__ == "__main__":
    unittest.main()
