"""The plugin's own log: what others can cause is said once a minute with a count, and the file under
MSMONITOR_LOG_PATH is bounded (runs on Python 3.8 too)."""

import glob
import logging
import os
import subprocess
import sys
import tempfile
import unittest

from msmonitor_plugin import agent
from msmonitor_plugin.throttled import Throttled


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class ThrottledTest(unittest.TestCase):
    def test_said_at_once_then_once_a_period_with_the_count_since(self):
        logger = logging.getLogger("msmonitor_plugin.test_throttled")
        lines = Lines()
        logger.addHandler(lines)
        self.addCleanup(logger.removeHandler, lines)
        now = [100.0]
        refused = Throttled(logger, "dropped datagrams", period_s=60, clock=lambda: now[0])
        for _ in range(1000):
            refused()
        self.assertEqual(
            lines.lines, ["dropped datagrams: 1 since the last such line (said at most once every 60 s)"]
        )
        now[0] += 59.9
        refused()
        self.assertEqual(len(lines.lines), 1)
        now[0] += 0.1
        refused()
        self.assertEqual(len(lines.lines), 2)
        self.assertTrue(
            lines.lines[1].startswith("dropped datagrams: 1001 since the last such line"), lines.lines
        )


class LogFileTest(unittest.TestCase):
    def test_the_log_file_rotates_and_stays_bounded(self):
        # In a process of its own: the plugin's logger is process-wide.
        code = (
            "import logging, os, msmonitor_plugin.agent as a\n"
            "a.configure_logging(os.environ)\n"
            "log = logging.getLogger('msmonitor_plugin')\n"
            "for i in range(12000): log.warning('x' * 1000)\n"
        )
        with tempfile.TemporaryDirectory() as logs:
            env = dict(os.environ, MSMONITOR_LOG_PATH=logs, PYTHONPATH=_plugin_path())
            out = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
            )
            self.assertEqual(out.returncode, 0, out.stderr)
            files = glob.glob(os.path.join(logs, "msmonitor_plugin_*.log*"))
            total = sum(os.path.getsize(f) for f in files)
        self.assertEqual(len(files), 1 + agent.LOG_BACKUPS, files)  # 12 MB written: it rotated
        self.assertLessEqual(total, agent.LOG_MAX_BYTES * (1 + agent.LOG_BACKUPS))


def _plugin_path():
    import msmonitor_plugin

    return os.path.dirname(os.path.dirname(msmonitor_plugin.__file__))


if __name__ == "__main__":
    unittest.main()
