"""The trace state machine at step boundaries, with a stand-in recorder (runs on Python 3.8 too)."""

import os
import time
import unittest

from msmonitor_contract import wire
from msmonitor_contract.configtext import ConfigTextError
from msmonitor_contract.kinds.gputrace import kineto_output_file
from msmonitor_contract.vocabulary import CommandKind, TracePhase
from msmonitor_plugin.steps import StepCounter
from msmonitor_plugin.trace.spec import parse
from msmonitor_plugin.trace.tracer import Tracer


class RecorderStandIn:
    """Records what the session asks of a profiler backend."""

    def __init__(self, spec):
        self.spec, self.calls, self.warnings, self.output = spec, [], [], "/out"

    def start(self, first_step):
        self.calls.append(("start", first_step))

    def step(self):
        self.calls.append(("step",))

    def stop(self):
        self.calls.append(("stop",))

    def write(self):
        return ["/out/trace.json"]

    def add_file(self, name, text):
        path = os.path.join(self.output, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def close(self):
        pass  # holds nothing open


def npu_command(trace_id="7", **keys):
    text = {"ACTIVITIES_LOG_FILE": "/out", "PROFILE_START_STEP": "5", "ACTIVITIES_ITERATIONS": "3"}
    text.update(keys)
    return wire.Command(CommandKind.NPUTRACE, trace_id, "\n".join(f"{k}={v}" for k, v in text.items()))


class TracerTestCase(unittest.TestCase):
    """A Tracer over a step counter the test drives, recording with stand-ins (no test of its own)."""

    def setUp(self):
        self.counter = StepCounter()
        self.events = []
        self.recorders = []

        def factory(spec):
            self.recorders.append(RecorderStandIn(spec))
            return self.recorders[-1]

        self.tracer = Tracer(self.counter, self.events.append, factory)

    def steps(self, n):
        for _ in range(n):
            self.counter.step()

    def wait_written(self):
        for _ in range(500):
            if self.events and self.events[-1].phase in (TracePhase.FINISHED, TracePhase.FAILED):
                return self.events[-1]
            time.sleep(0.01)  # the writer runs on its own thread
        self.fail("the trace was never written")


class SessionTest(TracerTestCase):
    def test_records_exactly_steps_s_to_s_plus_n_minus_1(self):
        self.steps(2)  # step 2 is running
        self.tracer.accept(npu_command())
        self.assertEqual(self.events[0].phase, TracePhase.READY)
        self.assertEqual((self.events[0].start_step, self.events[0].stop_step), (5, 8))
        self.steps(3)  # boundary that begins step 5
        self.assertEqual(self.recorders[0].calls, [("start", 5)])
        self.assertEqual(self.events[1].phase, TracePhase.RUNNING)
        self.steps(3)  # steps 6 and 7 begin, then 8 ends the trace
        self.assertEqual(self.recorders[0].calls, [("start", 5), ("step",), ("step",), ("stop",)])
        finished = self.wait_written()
        self.assertEqual(finished.phase, TracePhase.FINISHED)
        self.assertEqual(finished.files, ["/out/trace.json"])
        self.assertIsNone(self.counter.pending, "nothing left on the hot path")
        self.assertEqual(self.tracer.state(), ("", ""))

    def test_minus_one_means_the_next_step(self):
        self.steps(10)
        self.tracer.accept(npu_command(PROFILE_START_STEP="-1", ACTIVITIES_ITERATIONS="1"))
        self.assertEqual(self.events[0].start_step, 11)

    def test_minus_one_armed_just_after_a_boundary_starts_at_the_following_one(self):
        self.tracer.accept(npu_command(PROFILE_START_STEP="-1", ACTIVITIES_ITERATIONS="2"))
        self.assertEqual(self.events[0].start_step, 1)
        self.counter.count += 1  # the training thread crossed boundary 1 before the hook was read
        self.steps(1)  # boundary 2: the trace starts here, and still records 2 steps
        self.assertEqual(self.recorders[0].calls, [("start", 2)])
        self.assertEqual((self.events[1].start_step, self.events[1].stop_step), (2, 4))

    def test_a_roundup_start_slipped_past_while_arming_moves_to_the_next_multiple(self):
        self.steps(7)
        text = "ACTIVITIES_LOG_FILE=/tmp/t.json\nPROFILE_START_ITERATION_ROUNDUP=5\nACTIVITIES_ITERATIONS=2"
        self.tracer.accept(wire.Command(CommandKind.GPUTRACE, "9", text))
        self.assertEqual(self.events[0].start_step, 10)
        self.counter.count = 10  # boundary 10 passed before the hook was read
        self.steps(5)  # boundary 15 is the next multiple
        self.assertEqual(self.recorders[0].calls[0], ("start", 15))

    def test_a_start_step_that_already_began_fails_with_the_reason(self):
        self.steps(5)
        self.tracer.accept(npu_command())
        self.assertEqual(self.events[-1].phase, TracePhase.FAILED)
        self.assertIn("start step 5 has already begun (the process is at step 5)", self.events[-1].error)
        self.assertIsNone(self.counter.pending)

    def test_one_trace_at_a_time_and_repeated_pushes_are_ignored(self):
        self.tracer.accept(npu_command("1"))
        self.tracer.accept(npu_command("1"))
        self.tracer.accept(npu_command("2"))
        self.assertEqual(
            [(e.trace_id, e.phase) for e in self.events], [("1", TracePhase.READY), ("2", TracePhase.FAILED)]
        )
        self.assertIn("busy with trace 1", self.events[-1].error)
        self.assertEqual(self.tracer.state(), ("1", TracePhase.READY))

    def test_exit_mid_trace_reports_failure(self):
        self.tracer.accept(npu_command())
        self.steps(6)
        self.tracer.abort("the process exited at step 6")
        self.assertEqual(self.events[-1].phase, TracePhase.FAILED)
        self.assertEqual(self.events[-1].error, "the process exited at step 6")

    def test_kineto_iteration_mode_starts_at_the_next_roundup_multiple(self):
        self.steps(7)
        text = (
            "ACTIVITIES_LOG_FILE=/tmp/t.json\nPROFILE_START_ITERATION=0\n"
            "PROFILE_START_ITERATION_ROUNDUP=5\nACTIVITIES_ITERATIONS=2"
        )
        self.tracer.accept(wire.Command(CommandKind.GPUTRACE, "9", text))
        self.assertEqual((self.events[0].start_step, self.events[0].stop_step), (10, 12))

    def test_a_recorder_that_raises_fails_the_trace_not_the_step(self):
        def broken(spec):
            raise RuntimeError("no profiler here")

        tracer = Tracer(self.counter, self.events.append, broken)
        tracer.accept(npu_command(PROFILE_START_STEP="1"))
        self.steps(1)  # must not raise
        self.assertEqual(self.events[-1].phase, TracePhase.FAILED)
        self.assertIn("RuntimeError: no profiler here", self.events[-1].error)


class SpecTest(unittest.TestCase):
    def test_msmonitor_text_with_trace_id_wrapping(self):
        spec = parse(
            npu_command(PROFILE_ACTIVITIES="CPU", PROFILE_ANALYSE="true", PROFILE_PROFILER_LEVEL="Level1")
        )
        self.assertEqual(
            (spec.start_step, spec.iterations, spec.activities, spec.analyse), (5, 3, ["CPU"], True)
        )
        self.assertEqual(spec.npu["PROFILE_PROFILER_LEVEL"], "Level1")

    def test_time_based(self):
        spec = parse(
            wire.Command(
                CommandKind.NPUTRACE,
                "1",
                "ACTIVITIES_LOG_FILE=/o\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=300",
            )
        )
        self.assertFalse(spec.step_based)
        self.assertEqual(spec.duration_ms, 300)

    def test_bad_values_name_the_key(self):
        with self.assertRaisesRegex(ConfigTextError, "ACTIVITIES_ITERATIONS=x is not an integer"):
            parse(npu_command(ACTIVITIES_ITERATIONS="x"))
        with self.assertRaisesRegex(ConfigTextError, "PROFILE_START_STEP=-2 must be >= -1"):
            parse(npu_command(PROFILE_START_STEP="-2"))
        with self.assertRaisesRegex(ConfigTextError, "ACTIVITIES_LOG_FILE is required"):
            parse(wire.Command(CommandKind.NPUTRACE, "1", "ACTIVITIES_ITERATIONS=1"))

    def test_kineto_file_naming(self):
        self.assertEqual(kineto_output_file("/tmp/t.json", 42), "/tmp/t_42.json")
        self.assertEqual(kineto_output_file("/tmp/t.pt.trace.json", 42), "/tmp/t_42.pt.trace.json")
        self.assertEqual(kineto_output_file("/tmp/trace", 42), "/tmp/trace")


if __name__ == "__main__":
    unittest.main()
