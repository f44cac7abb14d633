"""``dyno dynamic`` windows in the plugin: start and stop at step boundaries, or at once in a process that
counts no steps, and the PROF_ directory's info.json (a stand-in recorder; runs on Python 3.8 too)."""

import json
import os
import re
import shutil
import tempfile
import time
import unittest

from test_trace_session import RecorderStandIn

from msmonitor_contract import configtext, wire
from msmonitor_contract.kinds import DYNAMIC
from msmonitor_contract.vocabulary import CommandKind, TracePhase
from msmonitor_plugin.steps import StepCounter
from msmonitor_plugin.trace import prof, session
from msmonitor_plugin.trace.recorder import Recorder
from msmonitor_plugin.trace.spec import parse
from msmonitor_plugin.trace.tracer import Tracer


def start_command(window="w1", **keys):
    values = {"DYNAMIC_ACTION": "start", "DYNAMIC_OUTPUT": "/data/prof"}
    values.update(keys)
    return wire.Command(CommandKind.DYNAMIC, window, configtext.render(DYNAMIC.keys, values))


def stop_command(window="w1"):
    return wire.Command(
        CommandKind.DYNAMIC, window, configtext.render(DYNAMIC.keys, {"DYNAMIC_ACTION": "stop"})
    )


class WindowTest(unittest.TestCase):
    def setUp(self):
        self.counter = StepCounter()
        self.events = []
        self.recorders = []
        self.out = tempfile.mkdtemp(prefix="window")
        self.addCleanup(shutil.rmtree, self.out)

        def factory(spec):
            recorder = RecorderStandIn(spec)
            recorder.output, recorder.backend = self.out, "stand-in"
            self.recorders.append(recorder)
            return recorder

        self.tracer = Tracer(self.counter, self.events.append, factory)

    def steps(self, n):
        for _ in range(n):
            self.counter.step()

    def wait_final(self):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.events and self.events[-1].phase in (TracePhase.FINISHED, TracePhase.FAILED):
                return self.events[-1]
            time.sleep(0.01)  # the writer runs on its own thread
        self.fail("the window was never written")

    def info(self):
        with open(os.path.join(self.out, prof.INFO_FILE)) as f:
            return json.load(f)

    def test_a_window_covers_whole_steps_from_the_boundary_after_start_to_the_one_after_stop(self):
        self.steps(3)  # step 3 runs
        self.tracer.accept(start_command())
        self.assertEqual((self.events[-1].phase, self.events[-1].start_step), (TracePhase.READY, 4))
        self.steps(1)
        self.assertEqual(self.recorders[0].calls, [("start", 4)])
        self.steps(2)  # steps 5 and 6 begin
        self.tracer.accept(stop_command())
        self.assertNotIn(("stop",), self.recorders[0].calls, "a window stops at a boundary, not mid-step")
        self.steps(1)  # boundary 7: steps 4, 5 and 6 are in
        finished = self.wait_final()
        self.assertEqual(finished.phase, TracePhase.FINISHED)
        self.assertEqual((finished.start_step, finished.stop_step), (4, 7))
        info = self.info()
        self.assertEqual((info["first_step"], info["last_step"], info["complete"]), (4, 6, True))
        self.assertEqual(finished.files[-1], os.path.join(self.out, prof.INFO_FILE))
        self.assertGreater(finished.size_bytes, 0)
        self.assertIsNone(self.counter.pending, "nothing left on the hot path")

    def wait_phase(self, phase):
        deadline = time.monotonic() + 5
        while not (self.events and self.events[-1].phase == phase):
            if time.monotonic() > deadline:
                self.fail(f"no {phase} event: {self.events}")
            time.sleep(0.01)  # the start runs on a timer thread

    def test_a_process_that_counts_no_steps_starts_after_the_grace_and_stops_at_once(self):
        grace, session.START_GRACE_S = session.START_GRACE_S, 0.01
        self.addCleanup(setattr, session, "START_GRACE_S", grace)
        self.tracer.accept(start_command())
        self.assertEqual(self.events[-1].phase, TracePhase.READY)
        self.wait_phase(TracePhase.RUNNING)
        self.assertEqual(self.recorders[0].calls, [("start", 0)])
        self.tracer.accept(stop_command())
        self.assertEqual(self.wait_final().phase, TracePhase.FINISHED)
        self.assertEqual((self.info()["first_step"], self.info()["last_step"]), (-1, -1))

    def test_a_step_that_never_ends_is_stopped_between_steps_after_the_grace(self):
        grace, session.STOP_GRACE_S = session.STOP_GRACE_S, 0.05
        self.addCleanup(setattr, session, "STOP_GRACE_S", grace)
        self.steps(1)
        self.tracer.accept(start_command())
        self.steps(1)
        self.tracer.accept(stop_command())  # no boundary follows
        finished = self.wait_final()
        self.assertEqual(finished.phase, TracePhase.FINISHED)
        self.assertTrue(any("stopped during step 2" in w for w in finished.warnings), finished.warnings)

    def test_a_first_boundary_within_the_grace_starts_a_new_process_at_it(self):
        self.tracer.accept(start_command())  # the process has counted no step yet
        self.steps(1)
        self.assertEqual(self.recorders[0].calls, [("start", 1)])
        self.tracer.accept(stop_command())
        self.steps(2)
        self.assertEqual(self.wait_final().stop_step, 2, "it stopped at a boundary: it counts steps")

    def test_a_stop_before_the_first_boundary_fails_the_window_saying_why(self):
        self.steps(1)
        self.tracer.accept(start_command())
        self.tracer.accept(stop_command())
        self.assertEqual(self.events[-1].phase, TracePhase.FAILED)
        self.assertIn("before the window began", self.events[-1].error)
        self.assertEqual(self.recorders, [], "no profiler was started")

    def test_a_stop_for_a_window_this_process_does_not_run_is_answered(self):
        self.tracer.accept(stop_command("nope"))
        self.assertEqual((self.events[-1].trace_id, self.events[-1].phase), ("nope", TracePhase.FAILED))
        self.assertIn("no such trace", self.events[-1].error)

    def test_exit_while_collecting_keeps_what_was_recorded_marked_incomplete(self):
        self.steps(1)
        self.tracer.accept(start_command())
        self.steps(3)
        self.tracer.abort("the process exited at step 4")
        finished = self.events[-1]  # written before abort returns: the process is about to end
        self.assertEqual(finished.phase, TracePhase.FINISHED)
        self.assertIn("incomplete: the process exited at step 4", finished.warnings)
        self.assertFalse(self.info()["complete"])

    def test_a_bad_action_is_answered_not_raised(self):
        text = configtext.render(DYNAMIC.keys, {"DYNAMIC_ACTION": "pause"})
        self.tracer.accept(wire.Command(CommandKind.DYNAMIC, "w9", text))
        self.assertEqual(self.events[-1].phase, TracePhase.FAILED)
        self.assertIn("DYNAMIC_ACTION=pause", self.events[-1].error)


class MsprofOptionsTest(unittest.TestCase):
    def test_given_options_are_kept_and_named_as_msprof_spells_them_when_not_honoured(self):
        spec = parse(start_command(MSPROF_AICPU=True, MSPROF_TASK_TIME="l1", MSPROF_HCCL=False))
        self.assertEqual(spec.msprof, {"MSPROF_AICPU": "true", "MSPROF_TASK_TIME": "l1"})
        recorder = Recorder(spec)
        recorder._unhonoured(list(spec.msprof), "no Ascend here")
        self.assertEqual(recorder.warnings, ["not honoured (no Ascend here): --aicpu=on, --task-time=l1"])

    def test_the_directory_is_named_as_msprof_names_its_own_with_an_increasing_sequence(self):
        first, second = prof.directory_name(1796059332171), prof.directory_name(1796059332171)
        pattern = r"PROF_(\d{6})_(\d{17})_[A-Z0-9]{16}"
        self.assertRegex(first, pattern)
        self.assertEqual(int(re.match(pattern, second).group(1)), int(re.match(pattern, first).group(1)) + 1)


if __name__ == "__main__":
    unittest.main()
