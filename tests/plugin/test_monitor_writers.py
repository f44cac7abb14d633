"""--log-file outputs: JSONL with msMonitor's rotation and keys, the writer thread (DB: test_msprof_db)."""

import json
import os
import re
import tempfile
import threading
import unittest
from pathlib import Path

from msmonitor_contract.activity import HOST, Kind
from msmonitor_plugin.monitor.records import CommunicationExtras, HostExtras, MarkerExtras, Record
from msmonitor_plugin.monitor.writers import (
    JsonlWriter,
    WriterThread,
    dump_interval_s,
    queue_capacity,
    record_json,
    rotation,
)

NAME = re.compile(r"^msmonitor_4242_\d{17}_3\.jsonl$")
KERNEL = Record(Kind.KERNEL, 10, 20, 1, 3, 7, "matmul", "KERNEL_AIVEC")
API = Record(Kind.API, 11, 12, HOST, 0, 8, "aclnnAdd", "", HostExtras(100, 101))
COMM = Record(
    Kind.COMMUNICATION, 13, 14, 1, 5, 9, "allreduce", "", CommunicationExtras(1024, "FP16", "g0", "RING")
)
MARKER = Record(Kind.MARKER, 15, 16, HOST, 0, 0, "fwd", "", MarkerExtras("train", "Host", 2, 5, 100, 101))
DEVICE_MARKER = Record(Kind.MARKER, 15, 16, 1, 7, 0, "fwd", "", MarkerExtras("train", "Device", 16, 5))


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()


class JsonlTest(TempDirTest):
    def test_keys_follow_msmonitor(self):
        self.assertEqual(
            record_json(KERNEL),
            {
                "kind": "Kernel",
                "name": "matmul",
                "startNs": 10,
                "endNs": 20,
                "deviceId": 1,
                "streamId": 3,
                "type": "KERNEL_AIVEC",
                "correlationId": 7,
            },
        )
        self.assertEqual(
            record_json(API),
            {
                "kind": "API",
                "name": "aclnnAdd",
                "startNs": 11,
                "endNs": 12,
                "processId": 100,
                "threadId": 101,
                "correlationId": 8,
            },
        )
        self.assertEqual(
            {k: record_json(COMM)[k] for k in ("dataType", "count", "commName", "algType")},
            {"dataType": "FP16", "count": 1024, "commName": "g0", "algType": "RING"},
        )
        self.assertEqual(
            record_json(MARKER),
            {
                "kind": "Marker",
                "sourceKind": "Host",
                "name": "fwd",
                "startNs": 15,
                "endNs": 16,
                "domain": "train",
                "processId": 100,
                "threadId": 101,
                "id": 5,
            },
        )
        self.assertEqual(
            (record_json(DEVICE_MARKER)["deviceId"], record_json(DEVICE_MARKER)["streamId"]), (1, 7)
        )

    def test_rotates_every_n_lines_and_keeps_at_most_m_files(self):
        writer = JsonlWriter(self.dir, 4242, 3, lines=100, files=3)
        writer.write([KERNEL] * 450)
        writer.close()
        names = sorted(os.listdir(self.dir))
        self.assertEqual(len(names), 3)
        self.assertTrue(all(NAME.match(n) for n in names), names)
        lines = [json.loads(line) for n in names for line in Path(self.dir, n).read_text().splitlines()]
        self.assertEqual(len(lines), 100 + 100 + 51)  # the two oldest files are gone
        self.assertEqual(lines[-1], {"kind": "rank_device_map", "rank": 3, "device": [1]})
        self.assertEqual(len(set(names)), len(names))  # stamps strictly increase

    def test_a_cpu_only_session_ends_with_an_empty_rank_device_map_and_no_records_write_no_file(self):
        writer = JsonlWriter(self.dir, 4242, 3, lines=100)
        writer.write([API] * 3)  # host records only: no device was seen
        writer.close()
        (name,) = os.listdir(self.dir)
        lines = [json.loads(line) for line in Path(self.dir, name).read_text().splitlines()]
        self.assertEqual(len(lines), 4)
        self.assertEqual(lines[-1], {"kind": "rank_device_map", "rank": 3, "device": []})
        os.remove(Path(self.dir, name))
        JsonlWriter(self.dir, 4242, 3).close()
        self.assertEqual(os.listdir(self.dir), [])

    def test_keeps_all_files_by_default(self):
        writer = JsonlWriter(self.dir, 4242, 3, lines=100)
        writer.write([API] * 999)  # and the rank_device_map line: 1000 lines
        writer.close()
        self.assertEqual(len(os.listdir(self.dir)), 10)

    def test_rotation_settings_from_command_environment_or_defaults(self):
        self.assertEqual(rotation(None, None, {}), (10000, -1))
        self.assertEqual(rotation(300, 4, {"MSMONITOR_JSONL_ROTATE_LOG_LINES": "500"}), (300, 4))
        env = {"MSMONITOR_JSONL_ROTATE_LOG_LINES": "7", "MSMONITOR_JSONL_ROTATE_LOG_FILES": "1"}
        self.assertEqual(rotation(None, None, env), (100, -1))
        self.assertEqual(rotation(None, None, {"MSMONITOR_JSONL_ROTATE_LOG_FILES": "5"}), (10000, 5))

    def test_queue_and_dump_interval_environment(self):
        self.assertEqual(queue_capacity({}), 1 << 19)
        self.assertEqual(
            queue_capacity({"MSMONITOR_JSONL_BUFFER_CAPACITY": "1000"}), 1 << 19
        )  # not a power of 2
        self.assertEqual(queue_capacity({"MSMONITOR_JSONL_BUFFER_CAPACITY": str(1 << 25)}), 1 << 21)
        self.assertEqual(dump_interval_s({"MSMONITOR_JSONL_MAX_DUMP_INTERVAL": "2000"}), 2.0)
        self.assertEqual(dump_interval_s({"MSMONITOR_JSONL_MAX_DUMP_INTERVAL": "10"}), 30.0)


class BlockingWriter:
    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Event()
        self.written = []
        self.closed = False

    def write(self, records):
        self.entered.set()
        self.release.wait(10)
        self.written.extend(records)

    def flush(self):
        pass

    def close(self):
        self.closed = True


class WriterThreadTest(unittest.TestCase):
    def test_a_full_queue_drops_and_counts_and_close_drains(self):
        writer = BlockingWriter()
        thread = WriterThread(writer, capacity=6, flush_s=0.05)
        thread.put([KERNEL] * 4)
        self.assertTrue(writer.entered.wait(10))  # the first batch is being written (and stuck)
        thread.put([KERNEL] * 4)
        thread.put([KERNEL] * 4)  # over capacity while the writer is stuck
        writer.release.set()
        thread.close()
        self.assertEqual(thread.dropped, 4)
        self.assertEqual(len(writer.written), 8)
        self.assertTrue(writer.closed)


if __name__ == "__main__":
    unittest.main()
