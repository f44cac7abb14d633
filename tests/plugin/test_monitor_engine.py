"""The Monitor's command semantics with a scripted backend, and the torch backend's event classification
(with stand-in Kineto events: torch itself is exercised in tests/test_monitor_torch.py)."""

import os
import threading
import time
import unittest

from msmonitor_contract.activity import HOST, Kind
from msmonitor_contract.vocabulary import MonitorState
from msmonitor_plugin.monitor.backends import NoBackend
from msmonitor_plugin.monitor.config import MonitorConfig
from msmonitor_plugin.monitor.engine import Monitor
from msmonitor_plugin.monitor.records import HostExtras, MarkerExtras, Record
from msmonitor_plugin.monitor.torch_backend import SELF_TIME_TYPE, Sampler, classify


class ScriptedBackend:
    """Delivers one Kernel record per flush; remembers what it was asked."""

    name = "scripted"
    host_is_device = False

    def __init__(self):
        self.calls = []
        self.kinds = frozenset()
        self.collector = None

    def start(self, collector, kinds):
        self.collector = collector
        self.calls.append("start")
        return self.set_kinds(kinds)

    def set_kinds(self, kinds):
        self.kinds = kinds
        return {k: "scripted" for k in kinds if k == Kind.HCCL}

    def begin_interval(self, now, interval_s):
        pass

    def poll(self, now):
        return None

    def flush(self):
        self.collector.add_records(
            [Record(Kind.KERNEL, 0, 10, 0, 0, 0, "k"), Record(Kind.KERNEL, 0, 5, 0, 0, 0, "x")]
        )

    def take_sampled_ns(self):
        return None

    def stop(self):
        self.calls.append("stop")


def command(**changes):
    keys = dict(
        NPU_MONITOR_START="true",
        NPU_MONITOR_STOP="false",
        REPORT_INTERVAL_S="60",
        DURATION="0",
        MSPTI_ACTIVITY_KIND="Kernel",
        NPU_MONITOR_LOG_FILE="",
        NPU_MONITOR_EXPORT_TYPE="DB",
    )
    keys.update(changes)
    return MonitorConfig.parse(keys)


class Arrivals:
    """Collects reports and when each arrived; the test waits for the Nth instead of sleeping."""

    def __init__(self, reports):
        self.reports = reports
        self.at = []
        self._changed = threading.Condition()

    def add(self, report):
        with self._changed:
            self.reports.append(report)
            self.at.append(time.monotonic())
            self._changed.notify_all()

    def wait_for(self, count, timeout):
        with self._changed:
            return self._changed.wait_for(lambda: len(self.reports) >= count, timeout)


class MonitorTest(unittest.TestCase):
    def monitor(self, **kw):
        self.backend = ScriptedBackend()
        self.reports, self.stopped = [], []
        return Monitor(
            on_report=self.reports.append,
            on_stopped=self.stopped.append,
            backend_factory=lambda env: (self.backend, []),
            **kw,
        )

    def test_start_stop_and_final_report(self):
        monitor = self.monitor()
        result = monitor.apply(command(MSPTI_ACTIVITY_KIND="Kernel,Hccl"))
        self.assertEqual(
            (result.state, result.backend, result.unavailable),
            (MonitorState.RUNNING, "scripted", {"Hccl": "scripted"}),
        )
        final = monitor.stop()
        self.assertEqual(monitor.state, MonitorState.IDLE)
        self.assertTrue(final.final)
        self.assertEqual(final.find(Kind.KERNEL)[0].count, 2)
        self.assertEqual(final.unavailable, {"Hccl": "scripted"})
        self.assertEqual((self.backend.calls, self.stopped), (["start", "stop"], ["command"]))
        self.assertIsNone(monitor.stop())  # idempotent

    def test_start_while_running_only_changes_kinds_filter_top_n_and_interval(self):
        monitor = self.monitor()
        monitor.apply(command(DURATION="100"))
        result = monitor.apply(
            command(
                DURATION="1",
                MSPTI_ACTIVITY_KIND="Kernel,API",
                NPU_MONITOR_FILTER="Kernel:k",
                REPORT_INTERVAL_S="5",
            )
        )
        self.assertEqual(self.backend.calls, ["start"])  # not restarted
        self.assertEqual(self.backend.kinds, frozenset({Kind.KERNEL, Kind.API}))
        self.assertEqual(monitor.config.duration_s, 100)  # duration is honoured at start only
        self.assertEqual(monitor.interval_s, 5)
        self.assertEqual(result.state, MonitorState.RUNNING)
        final = monitor.stop()
        self.assertEqual([n.name for n in final.find(Kind.KERNEL)[0].top], ["k"])  # the new filter applies
        self.assertEqual(final.counters["filtered"], 1)

    def test_stop_and_start_in_one_command_restarts(self):
        monitor = self.monitor()
        monitor.apply(command())
        monitor.apply(command(NPU_MONITOR_STOP="true"))
        self.assertEqual(self.backend.calls, ["start", "stop", "start"])
        monitor.stop()

    def test_a_command_without_start_leaves_an_idle_monitor_idle(self):
        monitor = self.monitor()
        self.assertEqual(monitor.apply(command(NPU_MONITOR_START="false")).state, MonitorState.IDLE)
        self.assertEqual(self.backend.calls, [])

    def test_reports_each_interval(self):
        monitor = self.monitor()
        arrivals = Arrivals(self.reports)
        monitor.on_report = arrivals.add
        begin = time.monotonic()
        monitor.apply(command(REPORT_INTERVAL_S="1"))
        self.assertTrue(arrivals.wait_for(2, timeout=30), "two interval reports")
        final = monitor.stop()
        first, second = self.reports[:2]
        self.assertEqual([(r.seq, r.final) for r in (first, second)], [(1, False), (2, False)])
        # The k-th report is due k intervals after the start, never sooner (monotonic on both sides).
        self.assertGreaterEqual(arrivals.at[0] - begin, 1.0)
        self.assertGreaterEqual(arrivals.at[1] - begin, 2.0)
        self.assertEqual([r.find(Kind.KERNEL)[0].count for r in (first, second)], [2, 2])  # one flush each
        self.assertIs(self.reports[-1], final)
        self.assertTrue(final.final and all(not r.final for r in self.reports[:-1]))
        self.assertEqual([r.seq for r in self.reports], list(range(1, len(self.reports) + 1)))
        ends = [r.end_ns for r in self.reports]
        self.assertEqual([r.start_ns for r in self.reports[1:]], ends[:-1])  # intervals tile time

    def test_stops_when_the_duration_expires(self):
        monitor = self.monitor()
        done = threading.Event()
        stopped_at = []
        monitor.on_stopped = lambda reason: (
            self.stopped.append(reason),
            stopped_at.append(time.monotonic()),
            done.set(),
        )
        begin = time.monotonic()
        monitor.apply(command(REPORT_INTERVAL_S="1", DURATION="2.2"))
        self.assertTrue(done.wait(30))
        self.assertEqual(self.stopped, ["duration"])
        self.assertEqual(monitor.state, MonitorState.IDLE)
        self.assertGreaterEqual(stopped_at[0] - begin, 2.2, "not before the duration")
        # How many interval reports came first depends on how promptly the monitor thread ran; never
        # more than the duration holds intervals, and the last report is the one final report.
        self.assertLessEqual(len(self.reports) - 1, 2)
        self.assertEqual([r.final for r in self.reports], [False] * (len(self.reports) - 1) + [True])
        self.assertEqual([r.seq for r in self.reports], list(range(1, len(self.reports) + 1)))
        ends = [r.end_ns for r in self.reports]
        self.assertEqual([r.start_ns for r in self.reports[1:]], ends[:-1])

    def test_without_a_backend_every_kind_is_unavailable(self):
        monitor = Monitor(backend_factory=lambda env: (NoBackend(), ["why"]))
        result = monitor.apply(command(MSPTI_ACTIVITY_KIND="Kernel,Marker"))
        self.assertEqual((result.backend, set(result.unavailable)), ("none", {"Kernel", "Marker"}))
        self.assertEqual(monitor.stop().kinds, [])


class Event:
    """Stands in for torch's _KinetoEvent: the resource id is the OS thread of a host event (here the
    profiler's thread number + 1000), the stream of a device one."""

    # One argument per field of the _KinetoEvent it stands in for: the event is the grouping.
    def __init__(self, name, start, end, activity="cpu_op", tid=1, device=0, stream=7):  # noqa: PLR0913
        self._v = (name, start, end, activity, tid, device, stream, 1000 + start)

    def name(self):
        return self._v[0]

    def start_ns(self):
        return self._v[1]

    def end_ns(self):
        return self._v[2]

    def activity_type(self):
        return self._v[3]

    def start_thread_id(self):
        return self._v[4]

    def device_index(self):
        return self._v[5]

    def correlation_id(self):
        return self._v[7]

    def device_resource_id(self):
        return self._v[6] if self._v[3] in ("kernel", "gpu_memcpy", "gpu_memset") else 1000 + self._v[4]


STEP = [
    Event("train_step", 0, 100, "user_annotation"),
    Event("aten::linear", 1, 50),
    Event("aten::t", 2, 5),
    Event("aten::addmm", 6, 49),
    Event("aten::copy_", 7, 9),
    Event("c10d::allreduce_", 60, 90),
    Event("aten::add_", 0, 3, tid=2),  # another thread
]
ALL = frozenset(Kind)


class ClassifyTest(unittest.TestCase):
    def test_cpu_only(self):
        records = classify(STEP, ALL, cuda=False)
        by_kind = {}
        for r in records:
            by_kind.setdefault(r.kind, {})[r.name] = r
        # top-level operators, the collective the loop calls among them
        self.assertEqual(set(by_kind[Kind.API]), {"aten::linear", "aten::add_", "c10d::allreduce_"})
        self.assertEqual(by_kind[Kind.API]["aten::add_"].extras, HostExtras(os.getpid(), 1002))
        kernels = {name: r.duration_ns for name, r in by_kind[Kind.KERNEL].items()}
        self.assertEqual(
            kernels,
            {
                "aten::linear": 49 - 3 - 43,
                "aten::t": 3,
                "aten::addmm": 43 - 2,
                "aten::copy_": 2,
                "aten::add_": 3,
            },
        )
        self.assertTrue(
            all(r.type == SELF_TIME_TYPE and r.device == HOST for r in by_kind[Kind.KERNEL].values())
        )
        self.assertEqual(set(by_kind[Kind.COMMUNICATION]), {"c10d::allreduce_"})
        marker = by_kind[Kind.MARKER]["train_step"]
        self.assertEqual(marker.extras, MarkerExtras("default", "Host", 2, 1000, os.getpid(), 1001))

    def test_cuda_kernels_are_kernels_and_cpu_operators_are_not(self):
        events = [
            *STEP,
            Event("gemm", 10, 20, "kernel", device=1),
            Event("cudaLaunchKernel", 8, 9, "cuda_runtime"),
            Event("Memcpy HtoD", 1, 2, "gpu_memcpy", device=1),
        ]
        records = classify(events, ALL, cuda=True)
        kernels = [r for r in records if r.kind == Kind.KERNEL]
        self.assertEqual([(r.name, r.device, r.stream) for r in kernels], [("gemm", 1, 7)])
        runtime = [r for r in records if r.kind == Kind.RUNTIME_API]
        self.assertEqual([(r.device, r.extras) for r in runtime], [(HOST, HostExtras(os.getpid(), 1001))])
        self.assertEqual([r.device for r in records if r.kind == Kind.MEMCPY], [1])

    def test_only_requested_kinds(self):
        kinds = {r.kind for r in classify(STEP, frozenset({Kind.MARKER}), cuda=False)}
        self.assertEqual(kinds, {Kind.MARKER})


class SamplerTest(unittest.TestCase):
    def test_window_grows_slowly_and_shrinks_to_the_budget(self):
        sampler = Sampler(max_window_s=1.0, budget=0.01)
        self.assertEqual(sampler.window_s, 0.1)
        sampler.observe(0.1, stop_s=0.001, parse_s=0.001, interval_s=60)  # cheap: grows, at most x2
        self.assertAlmostEqual(sampler.window_s, 0.2)
        sampler.observe(0.2, stop_s=0.5, parse_s=0.1, interval_s=60)  # 1.7 s of cost for a 0.6 s budget
        self.assertAlmostEqual(sampler.window_s, 0.2 * 0.6 / 1.7)
        sampler.observe(0.1, stop_s=10, parse_s=0, interval_s=1)
        self.assertEqual(sampler.window_s, 0.05)  # the floor


if __name__ == "__main__":
    unittest.main()
