"""A trace's cancel (``dyno trace ID --cancel``): the same stop command a window's stop is, for every
trace kind, with a stand-in recorder (runs on Python 3.8 too)."""

import unittest

from test_trace_session import TracerTestCase, npu_command

from msmonitor_contract import wire
from msmonitor_contract.kinds.tracing import stop_text
from msmonitor_contract.vocabulary import CommandKind, TracePhase


class CancelTest(TracerTestCase):
    def cancel(self, trace_id, kind=CommandKind.NPUTRACE):
        self.tracer.accept(wire.Command(kind, trace_id, stop_text()))

    def test_a_pending_trace_is_dropped_and_the_process_freed(self):
        self.tracer.accept(npu_command("1", PROFILE_START_STEP="1000000000"))
        self.steps(2)
        self.cancel("1")
        self.assertEqual(
            (self.events[-1].phase, self.events[-1].error),
            (
                TracePhase.FAILED,
                "cancelled before it began (it waited for step 1000000000; the process is at step 2)",
            ),
        )
        self.assertIsNone(self.counter.pending, "nothing left on the hot path")
        self.assertEqual(self.recorders, [], "nothing was recorded")
        self.tracer.accept(npu_command("2", PROFILE_START_STEP="-1", ACTIVITIES_ITERATIONS="1"))
        self.assertEqual((self.events[-1].trace_id, self.events[-1].phase), ("2", TracePhase.READY))

    def test_a_recording_trace_stops_at_the_next_boundary(self):
        text = "ACTIVITIES_LOG_FILE=/o.json\nACTIVITIES_ITERATIONS=1000"
        self.tracer.accept(wire.Command(CommandKind.GPUTRACE, "3", text))
        session = self.tracer.session
        self.steps(2)  # started at boundary 1 (the first roundup multiple), recording step 1
        self.cancel("3", CommandKind.GPUTRACE)
        self.steps(1)  # boundary 3 ends it, not boundary 1001
        self.assertIsNone(self.counter.pending, "nothing left on the hot path")
        self.assertIn(("stop",), self.recorders[0].calls)
        self.assertEqual((session.start_step, session.stop_step), (1, 3))

    def test_a_cancel_for_a_trace_not_here_says_so(self):
        self.cancel("9")
        self.assertEqual(
            (self.events[-1].phase, self.events[-1].error),
            (TracePhase.FAILED, "no such trace runs in this process"),
        )


if __name__ == "__main__":
    unittest.main()
