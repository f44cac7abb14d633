"""One profiler per process: every recorder claims the plugin's slot, and the hello names its holder.

Runs on Python 3.8 too; a stand-in recorder, no framework.
"""

import tempfile
import threading
import unittest

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import MONITOR_HOLDER, WINDOW_HOLDER, CommandKind, TracePhase
from msmonitor_plugin import identity
from msmonitor_plugin.agent import Agent
from msmonitor_plugin.monitor_handler import MonitorHandler
from msmonitor_plugin.slot import ProfilerSlot
from msmonitor_plugin.steps import StepCounter
from msmonitor_plugin.trace.tracer import Tracer

# As service/switch.py names its operator collection.
SERVICE_OWNER = "the service profiler's operator collection (acl_task_time 3)"
MONITOR_START = "\n".join(
    [
        "NPU_MONITOR_START=true",
        "NPU_MONITOR_STOP=false",
        "REPORT_INTERVAL_S=10",
        "DURATION=0",
        "MSPTI_ACTIVITY_KIND=Kernel",
        "NPU_MONITOR_LOG_FILE=",
        "NPU_MONITOR_EXPORT_TYPE=DB",
    ]
)


def npu_command(trace_id="7", **keys):
    text = {"ACTIVITIES_LOG_FILE": "/out", "PROFILE_START_STEP": "2", "ACTIVITIES_ITERATIONS": "1"}
    text.update(keys)
    return wire.Command(CommandKind.NPUTRACE, trace_id, "\n".join(f"{k}={v}" for k, v in text.items()))


def gpu_command(trace_id="9"):
    text = "ACTIVITIES_LOG_FILE=/tmp/t.json\nPROFILE_START_ITERATION=2\nACTIVITIES_ITERATIONS=1"
    return wire.Command(CommandKind.GPUTRACE, trace_id, text)


class RecorderStandIn:
    def __init__(self, spec, fail_at=""):
        self.spec, self.calls, self.warnings, self.output = spec, [], [], "/out"
        self._fail_at = fail_at

    def _call(self, name, *args):
        self.calls.append((name, *args))
        if name == self._fail_at:
            raise RuntimeError(f"{name} broke")

    def start(self, first_step):
        self._call("start", first_step)

    def step(self):
        self._call("step")

    def stop(self):
        self._call("stop")

    def write(self):
        return ["/out/trace.json"]

    def close(self):
        pass  # holds nothing open


class TraceSlotTest(unittest.TestCase):
    def setUp(self):
        self.counter = StepCounter()
        self.slot = ProfilerSlot()
        self.events = []  # (event, the slot's holder when the event was reported)
        self.over = threading.Event()
        self.recorders = []
        self.fail_at = ""
        self.tracer = Tracer(self.counter, self.report, self.factory, slot=self.slot)

    def factory(self, spec):
        self.recorders.append(RecorderStandIn(spec, self.fail_at))
        return self.recorders[-1]

    def report(self, event):
        self.events.append((event, self.slot.holder))
        if event.phase in (TracePhase.FINISHED, TracePhase.FAILED):
            self.over.set()

    def steps(self, n):
        for _ in range(n):
            self.counter.step()

    def last(self):
        self.assertTrue(self.over.wait(10), "the trace never ended")
        return self.events[-1]

    # --- refused while another holds the slot ---------------------------------------------------------

    def test_a_trace_arriving_while_npu_monitor_holds_the_slot_fails_naming_it(self):
        self.assertIsNone(self.slot.claim(MONITOR_HOLDER))
        self.tracer.accept(npu_command())
        event, holder = self.last()
        self.assertEqual((event.trace_id, event.phase), ("7", TracePhase.FAILED))
        self.assertEqual(event.error, "refused: npu-monitor runs in this process (one profiler at a time)")
        self.assertEqual(holder, MONITOR_HOLDER)
        self.assertEqual(self.slot.holder, MONITOR_HOLDER, "the refused trace took nothing from the monitor")
        self.assertEqual((self.tracer.state(), self.counter.pending, self.recorders), (("", ""), None, []))
        # Once the monitor lets go, the next trace is taken.
        self.slot.release(MONITOR_HOLDER)
        self.tracer.accept(npu_command("8"))
        self.assertEqual(self.events[-1][0].phase, TracePhase.READY)

    def test_a_gputrace_is_refused_while_the_service_profiler_collects_operators(self):
        self.assertIsNone(self.slot.claim(SERVICE_OWNER))
        self.tracer.accept(gpu_command())
        event, _ = self.last()
        self.assertEqual(event.phase, TracePhase.FAILED)
        self.assertIn(f"refused: {SERVICE_OWNER} runs in this process", event.error)

    def test_a_trace_is_refused_while_a_dynamic_window_holds_the_slot(self):
        # Another tracer in the same process (the window's): the slot, not the tracer, refuses.
        self.assertIsNone(self.slot.claim(WINDOW_HOLDER))
        self.tracer.accept(npu_command())
        self.assertIn("refused: a dyno dynamic window runs in this process", self.last()[0].error)

    # --- claimed from ready to the end ----------------------------------------------------------------

    def test_a_trace_holds_the_slot_from_ready_to_finished_and_frees_it_before_saying_so(self):
        self.tracer.accept(npu_command())
        self.assertEqual(self.slot.holder, "nputrace 7")
        self.steps(2)  # step 2 begins: the profiler starts
        self.steps(1)  # step 3 begins: it stops, and the trace is written on its own thread
        event, holder_then = self.last()
        self.assertEqual(event.phase, TracePhase.FINISHED)
        self.assertEqual(
            [(e.phase, h) for e, h in self.events[:-1]],
            [(TracePhase.READY, "nputrace 7"), (TracePhase.RUNNING, "nputrace 7")],
        )
        self.assertIsNone(holder_then, "free before the daemon hears the trace finished")
        self.assertIsNone(self.slot.holder)

    def test_a_gputrace_claims_under_its_kind_and_id(self):
        self.tracer.accept(gpu_command("g1"))
        self.assertEqual(self.slot.holder, "gputrace g1")

    def test_npu_monitor_is_refused_while_a_trace_waits_for_its_step(self):
        sent = []
        monitor = MonitorHandler({}, send=lambda kind, payload: sent.append(payload), slot=self.slot)
        self.tracer.accept(npu_command())
        monitor.handle(wire.Command(kind=CommandKind.NPUMONITOR, trace_id="m1", config=MONITOR_START))
        answer = wire.MonitorEvent.from_payload(sent[-1])
        self.assertEqual((answer.command_id, answer.state), ("m1", "idle"))
        self.assertIn("refused: nputrace 7 runs in this process", answer.error)
        self.assertEqual(self.slot.holder, "nputrace 7")

    def test_a_trace_that_fails_when_accepted_frees_the_slot(self):
        self.steps(3)  # start step 2 has begun
        self.tracer.accept(npu_command())
        event, holder = self.last()
        self.assertEqual(event.phase, TracePhase.FAILED)
        self.assertIn("start step 2 has already begun", event.error)
        self.assertEqual((holder, self.slot.holder), (None, None))

    def test_a_profiler_that_fails_to_start_frees_the_slot(self):
        self.fail_at = "start"
        self.tracer.accept(npu_command())
        with self.assertLogs("msmonitor_plugin", "ERROR"):
            self.steps(2)  # must not raise
        event, holder = self.last()
        self.assertEqual((event.phase, event.error), (TracePhase.FAILED, "RuntimeError: start broke"))
        self.assertEqual((holder, self.slot.holder), (None, None))
        self.assertEqual(self.recorders[0].calls, [("start", 2)], "one that never started is not stopped")

    def test_a_profiler_that_fails_while_recording_is_stopped_before_the_slot_is_freed(self):
        self.fail_at = "step"
        self.tracer.accept(npu_command(ACTIVITIES_ITERATIONS="3"))
        with self.assertLogs("msmonitor_plugin", "ERROR"):
            self.steps(3)  # starts at 2, steps at 3: that raises
        event, holder = self.last()
        self.assertEqual((event.phase, event.error), (TracePhase.FAILED, "RuntimeError: step broke"))
        self.assertEqual(self.recorders[0].calls, [("start", 2), ("step",), ("stop",)])
        self.assertEqual((holder, self.slot.holder, self.counter.pending), (None, None, None))

    def test_a_trace_abandoned_at_exit_frees_the_slot(self):
        self.tracer.accept(npu_command())
        self.tracer.abort("the process exited at step 0")
        event, holder = self.last()
        self.assertEqual((event.phase, holder, self.slot.holder), (TracePhase.FAILED, None, None))

    def test_a_repeated_push_or_a_second_trace_leaves_the_holder_alone(self):
        self.tracer.accept(npu_command("1"))
        self.tracer.accept(npu_command("1"))
        self.tracer.accept(npu_command("2"))
        self.assertIn("busy with trace 1", self.events[-1][0].error)
        self.assertEqual(self.slot.holder, "nputrace 1")


class HelloProfilerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.agent = Agent(StepCounter(), self.dir.name, {})  # never started: no thread, no daemon
        self.addCleanup(self.agent.link.stop)

    def test_the_hello_names_the_slot_holder_and_says_nothing_when_free(self):
        self.assertEqual(self.agent._hello().profiler, "")
        self.agent.router.route(npu_command("t1", ACTIVITIES_LOG_FILE=self.dir.name))
        self.assertEqual(self.agent.tracer.state(), ("t1", TracePhase.READY))
        hello = self.agent._hello()
        self.assertEqual((hello.profiler, hello.trace_id), ("nputrace t1", "t1"))
        self.assertEqual(wire.Hello.from_payload(hello.to_payload()).profiler, "nputrace t1")
        self.agent.tracer.abort("the process exited at step 0")
        self.assertEqual(self.agent._hello().profiler, "")

    def test_the_hello_names_npu_monitor_and_the_trace_it_refused_is_not_taken(self):
        self.assertIsNone(self.agent.slot.claim(MONITOR_HOLDER))
        self.agent.router.route(npu_command("t2", ACTIVITIES_LOG_FILE=self.dir.name))
        self.assertEqual(self.agent.tracer.state(), ("", ""))
        self.assertEqual(self.agent._hello().profiler, "npu-monitor")

    def test_identity_passes_the_holder_through_and_an_older_peer_means_free(self):
        self.assertEqual(
            identity.hello(0, [], {}, identity.States(profiler=WINDOW_HOLDER)).profiler,
            "a dyno dynamic window",
        )
        self.assertEqual(wire.Hello.from_payload(b'{"pid": 1}').profiler, "")


if __name__ == "__main__":
    unittest.main()
