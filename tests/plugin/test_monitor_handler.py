"""The plugin's npu-monitor handler: what it answers the daemon, and what it applies."""

import unittest

from msmonitor_contract import wire
from msmonitor_plugin.monitor_handler import MonitorHandler

STOP = "\n".join(
    [
        "NPU_MONITOR_START=false",
        "NPU_MONITOR_STOP=true",
        "REPORT_INTERVAL_S=10",
        "DURATION=0",
        "MSPTI_ACTIVITY_KIND=Kernel",
        "NPU_MONITOR_LOG_FILE=",
        "NPU_MONITOR_EXPORT_TYPE=DB",
    ]
)


class RepeatedCommandTest(unittest.TestCase):
    def setUp(self):
        self.sent = []
        self.handler = MonitorHandler({}, send=lambda kind, payload: self.sent.append((kind, payload)))
        self.applied = []
        apply = self.handler._monitor.apply
        self.handler._monitor.apply = lambda config: self.applied.append(config) or apply(config)

    def command(self, command_id):
        self.handler.handle(wire.Command(kind="npumonitor", trace_id=command_id, config=STOP))

    def answers(self):
        return [wire.MonitorEvent.from_payload(p) for kind, p in self.sent if kind == wire.MONITOR]

    def test_a_command_pushed_again_is_answered_again_not_applied_again(self):
        # The daemon pushes a command again at each heartbeat until the answer reaches it.
        self.command("c1")
        self.command("c1")
        self.assertEqual(len(self.applied), 1)
        first, again = self.answers()
        self.assertEqual(first, again)
        self.assertEqual((first.command_id, first.state, first.error), ("c1", "idle", ""))

    def test_a_new_command_is_applied(self):
        self.command("c1")
        self.command("c2")
        self.assertEqual(len(self.applied), 2)
        self.assertEqual([a.command_id for a in self.answers()], ["c1", "c2"])


if __name__ == "__main__":
    unittest.main()
