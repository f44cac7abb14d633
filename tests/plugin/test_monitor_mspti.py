"""The MSPTI binding against the fake libmspti.so (a C test double built here): records cross the binding
with every field, buffers run out, names are NULL, records are larger than documented; and the Monitor
on top of it, in metric and log-file modes."""

import ctypes
import glob
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fake_mspti"))
import fake_mspti_build

from msmonitor_contract.activity import HOST, Kind
from msmonitor_contract.vocabulary import MonitorState
from msmonitor_plugin.monitor.aggregate import Aggregator
from msmonitor_plugin.monitor.backends import Collector, MsptiBackend
from msmonitor_plugin.monitor.config import MonitorConfig
from msmonitor_plugin.monitor.engine import Monitor, MonitorError
from msmonitor_plugin.monitor.filters import KEEP_ALL, Filter
from msmonitor_plugin.monitor.mspti import BufferPool, load_library
from msmonitor_plugin.monitor.records import UNNAMED, CommunicationExtras, HcclExtras, MemoryExtras

LIB = ""
ALL_KINDS = frozenset(Kind)


def setUpModule():
    global LIB
    try:
        LIB = fake_mspti_build.shared_library()
    except fake_mspti_build.NoCompiler as exc:
        if os.environ.get("CI"):  # CI has a compiler: a skip there would hide these tests failing
            raise
        raise unittest.SkipTest(str(exc)) from None


def fake(**settings):
    """The fake's settings for one test (it reads them at msptiSubscribe)."""
    settings = {"require_preload": 0, **settings}
    env = {"MSMONITOR_MSPTI_LIB": LIB, **fake_mspti_build.settings(**settings)}
    return mock.patch.dict(os.environ, env)


def wait_until(probe, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)  # polling the fake library's counters, which signal nothing


class ListWriter:
    """Stands in for the WriterThread: keeps the records."""

    def __init__(self):
        self.records = []
        self.lock = threading.Lock()

    def put(self, records):
        with self.lock:
            self.records.extend(records)


class BindingTest(unittest.TestCase):
    def setUp(self):
        self.lib = load_library(LIB)
        self.control = ctypes.CDLL(LIB)
        for name in ("fakeMsptiEvents", "fakeMsptiProduced", "fakeMsptiDropped"):
            getattr(self.control, name).restype = ctypes.c_uint64

    def run_backend(self, kinds, writer=None, flt=KEEP_ALL, count=0):
        aggregator = Aggregator(top_n=100)
        collector = Collector(aggregator, writer, flt)
        backend = MsptiBackend(self.lib, os.environ)
        # Every kind takes part from the first event, unless a test says how many the fake enables.
        start = {"FAKE_MSPTI_START_KINDS": os.environ.get("FAKE_MSPTI_START_KINDS", str(len(kinds)))}
        with mock.patch.dict(os.environ, start):
            unavailable = backend.start(collector, frozenset(kinds))
        try:
            wait_until(lambda: self.control.fakeMsptiDone())
        finally:
            backend.stop()
        report = aggregator.take(seq=1, pid=os.getpid(), backend="mspti", start_ns=0, end_ns=1)
        return backend, report, unavailable

    def test_every_field_crosses_the_binding(self):
        writer = ListWriter()
        with fake(count=len(ALL_KINDS) * 8, names=4, devices=2):
            self.run_backend(ALL_KINDS, writer)
        by_kind = {}
        for r in writer.records:
            by_kind.setdefault(r.kind, []).append(r)
        self.assertEqual(set(by_kind), set(ALL_KINDS))
        kernels = sorted(by_kind[Kind.KERNEL], key=lambda r: r.correlation_id)
        self.assertEqual(
            [r.name for r in kernels[:5]], ["Kernel_0", "Kernel_1", "Kernel_2", "Kernel_3", "Kernel_0"]
        )
        self.assertEqual([r.device for r in kernels[:4]], [0, 1, 0, 1])
        self.assertEqual([r.duration_ns for r in kernels[:4]], [1000, 1100, 1200, 1300])
        self.assertEqual({(r.stream, r.type) for r in kernels}, {(3, "KERNEL_AIVEC")})
        self.assertGreater(kernels[0].start_ns, 1.7e18)  # ns since the epoch
        api = by_kind[Kind.API][0]
        self.assertEqual((api.device, api.extras.process_id), (HOST, os.getpid()))
        self.assertEqual(
            by_kind[Kind.COMMUNICATION][0].extras, CommunicationExtras(1024, "FP16", "group_0", "RING")
        )
        self.assertEqual(by_kind[Kind.HCCL][0].extras, HcclExtras(12.5, "group_0"))
        memory = sorted(by_kind[Kind.MEMORY], key=lambda r: r.correlation_id)
        self.assertEqual([r.name for r in memory[:2]], ["ALLOCATION", "RELEASE"])
        self.assertEqual(memory[1].extras, MemoryExtras(4096, 0x1001))
        copies = sorted(by_kind[Kind.MEMCPY], key=lambda r: r.correlation_id)
        self.assertEqual([r.name for r in copies[:4]], ["HTOH", "HTOD", "DTOH", "DTOD"])
        markers = by_kind[Kind.MARKER]
        self.assertEqual(len(markers), 2 * 8)  # each range: a host and a device record
        self.assertEqual(
            {(r.domain, r.extras.source) for r in markers},
            {("fake_domain", "Host"), ("fake_domain", "Device")},
        )
        self.assertTrue(all(r.name.startswith("Marker_") for r in markers))

    def test_metric_mode_sums_match_what_was_produced(self):
        with fake(count=3 * 5000, names=8):
            backend, report, _ = self.run_backend([Kind.KERNEL, Kind.API, Kind.MARKER])
        (kernel,) = report.find(Kind.KERNEL)
        self.assertEqual(kernel.count, 5000)
        by_name = {n.name: n for n in kernel.top}
        self.assertEqual(by_name["Kernel_3"].count, 625)
        self.assertEqual(by_name["Kernel_3"].total_ns, 625 * 1300)
        self.assertEqual((kernel.min_ns, kernel.max_ns), (1000, 1700))
        self.assertEqual(report.find(Kind.API)[0].count, 5000)
        self.assertEqual({k.device for k in report.find(Kind.MARKER)}, {HOST, 0})
        self.assertEqual(report.counters["records"], self.control.fakeMsptiProduced())
        self.assertEqual(report.dropped, {})
        self.assertTrue(backend.check.verified >= {int(Kind.KERNEL), int(Kind.API)})

    def test_null_names_are_reported_unnamed_and_counted(self):
        with fake(count=2 * 100, names=4, null_every=10):
            _, report, _ = self.run_backend([Kind.KERNEL, Kind.MARKER])
        (kernel,) = report.find(Kind.KERNEL)
        self.assertEqual({n.name: n.count for n in kernel.top}[UNNAMED], 10)
        self.assertEqual(report.counters["unnamed"], 10)
        unnamed = [n.count for k in report.find(Kind.MARKER) for n in k.top if n.name == UNNAMED]
        self.assertEqual(unnamed, [10, 10])  # host and device ranges of the 10 unnamed markers

    def test_filter_by_name(self):
        with fake(count=2 * 100, names=4):
            _, report, _ = self.run_backend(
                [Kind.KERNEL, Kind.API], flt=Filter.parse("Kernel:Kernel_1,Kernel_2")
            )
        (kernel,) = report.find(Kind.KERNEL)
        self.assertEqual(sorted(n.name for n in kernel.top), ["Kernel_1", "Kernel_2"])
        self.assertEqual(report.find(Kind.API), [])
        self.assertEqual(report.counters["filtered"], 50 + 100)

    def test_buffer_exhaustion_declines_requests_and_counts_them(self):
        pool = BufferPool(64 * 1024, 2)
        saved, self.lib.pool = self.lib.pool, pool
        try:
            with fake(count=20000, deliver="flush"):
                _, report, _ = self.run_backend([Kind.KERNEL])
        finally:
            self.lib.pool = saved
        self.assertGreater(self.control.fakeMsptiDropped(), 0)
        self.assertGreater(report.dropped["buffer_requests_declined"], 0)
        self.assertEqual(report.find(Kind.KERNEL)[0].count, self.control.fakeMsptiProduced())
        self.assertEqual(pool.outstanding, 0)  # every buffer came back

    def test_records_larger_than_documented_are_walked_with_mspti(self):
        with fake(count=2 * 3000, names=4, record_pad=8):
            backend, report, _ = self.run_backend([Kind.KERNEL, Kind.API])
        self.assertTrue(backend.check.disabled)
        self.assertEqual(report.find(Kind.KERNEL)[0].count, 3000)
        self.assertEqual(report.find(Kind.KERNEL)[0].total_ns, 3000 * 1150)

    def test_kinds_mspti_refuses_are_reported_unavailable(self):
        with fake(count=10, start_kinds=1), mock.patch.dict(
            os.environ, {"FAKE_MSPTI_REQUIRE_PRELOAD": "1", "LD_PRELOAD": ""}
        ):
            _, _, unavailable = self.run_backend([Kind.KERNEL, Kind.HCCL, Kind.MEMORY])
        self.assertEqual(set(unavailable), {Kind.HCCL, Kind.MEMORY})
        self.assertIn("LD_PRELOAD", unavailable[Kind.HCCL])


def command(**changes):
    keys = {
        "NPU_MONITOR_START": "true",
        "NPU_MONITOR_STOP": "false",
        "REPORT_INTERVAL_S": "1",
        "DURATION": "0",
        "MSPTI_ACTIVITY_KIND": "Kernel,API,Marker",
        "NPU_MONITOR_LOG_FILE": "",
        "NPU_MONITOR_EXPORT_TYPE": "DB",
    }
    keys.update(changes)
    return MonitorConfig.parse(keys)


class MonitorOnFakeMsptiTest(unittest.TestCase):
    def test_reports_the_fakes_kernels_every_interval(self):
        reports, arrived = [], threading.Condition()

        def on_report(report):
            with arrived:
                reports.append((time.monotonic(), report))
                arrived.notify_all()

        monitor = Monitor(rank=0, on_report=on_report)
        with fake(rate=2000, names=4):
            begin = time.monotonic()
            result = monitor.apply(command())
            self.assertEqual(
                (result.state, result.backend, result.unavailable), (MonitorState.RUNNING, "mspti", {})
            )
            with arrived:
                self.assertTrue(arrived.wait_for(lambda: len(reports) >= 2, 30), "two interval reports")
            monitor.stop()
        for k, (at, report) in enumerate(reports[:2], start=1):
            self.assertFalse(report.final)
            self.assertGreaterEqual(at - begin, k * 1.0, "the k-th report is due k intervals after the start")
            names = {n.name for kernels in report.find(Kind.KERNEL) for n in kernels.top}
            self.assertTrue(names and names <= {f"Kernel_{i}" for i in range(4)}, names)
        self.assertTrue(reports[-1][1].final)

    def test_stops_by_duration(self):
        reports, stopped = [], threading.Event()
        monitor = Monitor(rank=0, on_report=reports.append, on_stopped=lambda reason: stopped.set())
        with fake(rate=2000, names=4):
            begin = time.monotonic()
            monitor.apply(command(DURATION="2.5"))
            self.assertTrue(stopped.wait(30))
            elapsed = time.monotonic() - begin
        self.assertEqual(monitor.state, MonitorState.IDLE)
        self.assertGreaterEqual(elapsed, 2.5)
        # As many interval reports as the monitor thread got to before the deadline: at most two.
        self.assertLessEqual(len(reports), 3)
        self.assertEqual([r.final for r in reports], [False] * (len(reports) - 1) + [True])
        self.assertGreater(sum(k.count for r in reports for k in r.find(Kind.KERNEL)), 0)

    def test_the_subscriber_slot_held_elsewhere_fails_the_start(self):
        control = ctypes.CDLL(LIB)
        handle = ctypes.c_void_p()
        with fake():
            self.assertEqual(control.msptiSubscribe(ctypes.byref(handle), None, None), 0)
            try:
                with self.assertRaises(MonitorError) as ctx:
                    Monitor().apply(command())
                self.assertIn("MULTIPLE_SUBSCRIBERS", str(ctx.exception))
            finally:
                control.msptiUnsubscribe(handle)

    def test_restart_and_reconfigure(self):
        reports = []
        monitor = Monitor(on_report=reports.append)
        with fake(rate=5000, names=4):
            monitor.apply(command(MSPTI_ACTIVITY_KIND="Kernel"))
            monitor.stop()
            monitor.apply(command(MSPTI_ACTIVITY_KIND="Kernel"))
            monitor.apply(command(NPU_MONITOR_START="false", MSPTI_ACTIVITY_KIND="API", TOP_N="2"))
            produced = ctypes.CDLL(LIB).fakeMsptiProduced
            produced.restype = ctypes.c_uint64
            after = produced()
            wait_until(lambda: produced() >= after + 100)  # API records made since the reconfiguration
            monitor.stop()
        final = reports[-1]
        self.assertTrue(final.find(Kind.API))
        self.assertLessEqual(len(final.find(Kind.API)[0].top), 2)

    def test_jsonl_log_files(self):
        with tempfile.TemporaryDirectory() as tmp, fake(count=3 * 500, names=4, start_kinds=3):
            monitor = Monitor(rank=5)
            result = monitor.apply(
                command(
                    NPU_MONITOR_LOG_FILE=tmp, NPU_MONITOR_EXPORT_TYPE="Jsonl", JSONL_ROTATE_LOG_LINES="200"
                )
            )
            self.assertEqual(result.output, os.path.realpath(tmp))
            wait_until(lambda: ctypes.CDLL(LIB).fakeMsptiDone())
            monitor.stop()
            files = sorted(glob.glob(os.path.join(tmp, f"msmonitor_{os.getpid()}_*_5.jsonl")))
            lines = [json.loads(line) for f in files for line in Path(f).read_text().splitlines()]
        self.assertEqual(len(files), len(lines) // 200 + 1)
        kinds = [line["kind"] for line in lines]
        self.assertEqual((kinds.count("Kernel"), kinds.count("API"), kinds.count("Marker")), (500, 500, 1000))
        self.assertEqual(lines[-1], {"kind": "rank_device_map", "rank": 5, "device": [0]})

    def test_sqlite_log_file(self):
        with tempfile.TemporaryDirectory() as tmp, fake(count=2 * 300, names=4, start_kinds=2):
            monitor = Monitor(rank=5)
            monitor.apply(
                command(
                    NPU_MONITOR_LOG_FILE=os.path.join(tmp, "new", "dir"),
                    MSPTI_ACTIVITY_KIND="Kernel,Communication",
                )
            )
            wait_until(lambda: ctypes.CDLL(LIB).fakeMsptiDone())
            monitor.stop()
            (path,) = glob.glob(os.path.join(tmp, "new", "dir", "*.db"))
            db = sqlite3.connect(path)
            counts = [  # msMonitor's tables: kernels are compute tasks, collectives communication ops
                db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("COMPUTE_TASK_INFO", "TASK", "COMMUNICATION_OP", "CANN_API")
            ]
            db.close()
        self.assertEqual(counts, [300, 300, 300, 0])

    def test_an_unusable_log_directory_fails_the_start(self):
        with tempfile.NamedTemporaryFile() as not_a_dir, fake(), self.assertRaises(MonitorError):
            Monitor().apply(command(NPU_MONITOR_LOG_FILE=not_a_dir.name))


if __name__ == "__main__":
    unittest.main()
