"""Golden bytes for every IPC message type, and the decoder's refusals (runs on Python 3.8 too)."""

import os
import socket
import struct
import unittest

from msmonitor_contract import wire

# A real capture from torch 2.13 with SLURM_JOB_ID=4242 (reference/kineto.md §3.3).
KINETO_REQ = bytes.fromhex(
    "2c00000000000000"
    + "72657100"
    + "00" * 28
    + "03000000"
    + "07000000"
    + "9210000000000000"
    + "77430000"
    + "76430000"
    + "40430000"
    + "3e430000"
    + "3d430000"
    + "82080000"
    + "76080000"
)
# A real ctxt from torch's own IpcFabricConfigClient::registerInstance(3), pid 15208, job 4242.
KINETO_CTXT = bytes.fromhex(
    "1000000000000000" + "6374787400" + "00" * 27 + "03000000" + "683b0000" + "9210000000000000"
)
EMPTY_REPLY = bytes.fromhex("0000000000000000" + "72657100" + "00" * 28)


class GoldenBytes(unittest.TestCase):
    def test_kineto_request_decodes_and_reencodes_byte_for_byte(self):
        datagram = wire.decode(KINETO_REQ)
        self.assertEqual(datagram.type, "req")
        request = wire.KinetoRequest.unpack(datagram.payload)
        self.assertEqual(
            request, wire.KinetoRequest(3, 4242, (17271, 17270, 17216, 17214, 17213, 2178, 2166))
        )
        self.assertEqual(wire.encode(wire.REQ, request.pack()), KINETO_REQ)

    def test_context_round_trip(self):
        datagram = wire.decode(KINETO_CTXT)
        self.assertEqual(datagram.type, "ctxt")
        context = wire.KinetoContext.unpack(datagram.payload)
        self.assertEqual(context, wire.KinetoContext(device=3, pid=15208, job_id=4242))
        self.assertEqual(wire.encode(wire.CTXT, context.pack()), KINETO_CTXT)

    def test_context_reply_is_a_4_byte_count(self):
        self.assertEqual(
            wire.encode(wire.CTXT, wire.pack_context_reply(1)),
            bytes.fromhex("0400000000000000" + "6374787400" + "00" * 27 + "01000000"),
        )

    def test_nothing_to_do_reply_is_a_bare_40_byte_header(self):
        self.assertEqual(wire.encode(wire.REQ), EMPTY_REPLY)
        self.assertEqual(len(EMPTY_REPLY), 40)

    def test_config_reply_carries_text_without_nul(self):
        text = b"ACTIVITIES_LOG_FILE=/tmp/x.json\nACTIVITIES_DURATION_MSECS=500"
        data = wire.encode(wire.REQ, text)
        self.assertEqual(data[:8], struct.pack("<Q", len(text)))
        self.assertEqual(data[40:], text)

    def test_npu_status_is_msmonitors_32_byte_struct(self):
        status = wire.NpuStatus(status=2, current_step=5, start_step=10, stop_step=12, pid=849, job_id=7)
        payload = status.pack()
        self.assertEqual(
            payload, bytes.fromhex("02000000050000000a0000000c00000051030000000000000700000000000000")
        )
        self.assertEqual(wire.NpuStatus.unpack(payload), status)
        header = wire.encode(wire.NPU_TRACE_STATUS, payload)[:40]
        self.assertEqual(header, struct.pack("<Q", 32) + b"npuTraceStatus".ljust(32, b"\0"))

    def test_json_messages_round_trip(self):
        hello = wire.Hello(
            pid=12, ancestors=[11, 10], job_id=42, rank=3, devices=[1], versions={"torch": "2.13.0"}
        )
        self.assertEqual(wire.Hello.from_payload(hello.to_payload()), hello)
        self.assertEqual(wire.Ack.from_payload(b'{"keepalive_s": 60, "later_field": 1}').keepalive_s, 60)


class Refusals(unittest.TestCase):
    def test_short_datagram(self):
        with self.assertRaisesRegex(wire.WireError, "shorter than the 40-byte header"):
            wire.decode(b"\x00" * 39)

    def test_size_that_lies(self):
        with self.assertRaisesRegex(wire.WireError, "header says 1000 payload bytes"):
            wire.decode(struct.pack("=Q32s", 1000, b"req") + b"abc")

    def test_type_without_nul(self):
        with self.assertRaisesRegex(wire.WireError, "not NUL-terminated"):
            wire.decode(struct.pack("=Q", 0) + b"x" * 32)

    def test_huge_pid_count(self):
        payload = struct.pack("=iiq", 3, 1 << 30, 0) + b"\x01\x00\x00\x00"
        with self.assertRaisesRegex(wire.WireError, "pid count"):
            wire.KinetoRequest.unpack(payload)

    def test_pid_count_beyond_payload(self):
        payload = struct.pack("=iiq", 3, 5, 0) + struct.pack("=2i", 1, 2)
        with self.assertRaisesRegex(wire.WireError, "says 5 pids"):
            wire.KinetoRequest.unpack(payload)

    def test_zero_pids(self):
        with self.assertRaisesRegex(wire.WireError, "pid count 0"):
            wire.KinetoRequest.unpack(struct.pack("=iiq", 3, 0, 0))

    def test_json_with_wrong_types(self):
        with self.assertRaisesRegex(wire.WireError, "Hello.rank has the wrong type"):
            wire.Hello.from_payload(b'{"pid": 1, "rank": "3"}')
        with self.assertRaisesRegex(wire.WireError, "Hello.pid has the wrong type"):
            wire.Hello.from_payload(b'{"pid": true}')
        with self.assertRaisesRegex(wire.WireError, "not JSON"):
            wire.Hello.from_payload(b"{")
        with self.assertRaisesRegex(wire.WireError, "missing"):
            wire.Hello.from_payload(b"{}")

    def test_deeply_nested_json_is_refused_not_a_crash(self):
        with self.assertRaises(wire.WireError):
            wire.Hello.from_payload(b"[" * 100000 + b"]" * 100000)


if __name__ == "__main__":
    unittest.main()


class Senders(unittest.TestCase):
    def test_a_datagram_from_an_unbound_socket_is_dropped_not_an_error(self):
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(receiver.close)
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        receiver.bind(b"\0msmonitor-test-" + str(os.getpid()).encode())
        unbound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(unbound.close)
        unbound.sendto(b"x" * 40, receiver.getsockname())
        self.assertIsNone(wire.receive_from(receiver, b"\0dynolog"))
