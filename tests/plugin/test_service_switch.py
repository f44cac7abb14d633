"""The service profiler's file, watcher, API and switch in one process (standard library; Python 3.8 too)."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from contextlib import closing

from msmonitor_contract import configtext, wire
from msmonitor_contract.kinds import DYNAMIC
from msmonitor_contract.vocabulary import CommandKind, TracePhase
from msmonitor_plugin.router import CommandRouter
from msmonitor_plugin.service_profiler import api, config
from msmonitor_plugin.service_profiler.api import Level, Profiler
from msmonitor_plugin.service_profiler.source import ServiceSource
from msmonitor_plugin.service_profiler.switch import ServiceSwitch
from msmonitor_plugin.service_profiler.watch import FileWatch
from msmonitor_plugin.slot import ProfilerSlot
from msmonitor_plugin.steps import StepCounter
from msmonitor_plugin.trace.tracer import Tracer


def wait(probe, what, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)  # polling state another thread changes


class TempDir(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="service")
        self.addCleanup(shutil.rmtree, self.dir)
        self.path = os.path.join(self.dir, "ms_service_profiler_config.json")

    def write(self, **values):
        temp = self.path + ".tmp"
        with open(temp, "w") as f:
            json.dump(values, f)
        os.replace(temp, self.path)


class ConfigTest(TempDir):
    def test_values_are_read_as_mindie_reads_them_and_bad_ones_are_warnings(self):
        cfg = config.parse(
            {
                "enable": True,
                "prof_dir": "$HOME/prof",
                "profiler_level": "l1",
                "timelimit": 9000,
                "domain": "Request; KVCache;",
                "host_system_usage_freq": 60,
                "npu_memory_usage_freq": -1,
                "acl_task_time": 7,
            },
            env={"HOME": "/home/u"},
        )
        self.assertFalse(cfg.enable, "JSON true is not the integer 1")
        self.assertEqual(cfg.prof_dir, "/home/u/prof/")
        self.assertEqual((cfg.profiler_level, cfg.timelimit_s), (20, 7200))
        self.assertEqual(cfg.domains, frozenset({"Request", "KVCache"}))
        self.assertEqual(
            (cfg.host_system_usage_freq, cfg.npu_memory_usage_freq, cfg.acl_task_time), (0, 0, 0)
        )
        self.assertEqual(len(cfg.warnings), 4, cfg.warnings)
        self.assertTrue(any(w.startswith("timelimit=9000: above 7200 s") for w in cfg.warnings))

    def test_the_default_file_is_written_once_and_never_over_an_existing_one(self):
        self.assertTrue(config.ensure(self.path, {"HOME": "/home/u"}))
        with open(self.path) as f:
            written = json.load(f)
        self.assertEqual(written["prof_dir"], "/home/u/.ms_server_profiler/", "MindIE reads it unexpanded")
        self.assertEqual(written, {**config.DEFAULT_CONTENT, "prof_dir": "/home/u/.ms_server_profiler/"})
        self.assertEqual(written["metric_enable"], 0)
        self.write(enable=1, timelimit=5)
        self.assertTrue(config.ensure(self.path))
        config.write_back_disabled(self.path)
        with open(self.path) as f:
            self.assertEqual(json.load(f), {"enable": 0, "timelimit": 5}, "only enable changes")
        self.assertEqual(sorted(os.listdir(self.dir)), ["ms_service_profiler_config.json"], "no temp left")

    def test_the_write_back_goes_through_a_symlink_and_keeps_mode_and_owner(self):
        target = os.path.join(self.dir, "real.json")
        with open(target, "w") as f:
            json.dump({"enable": 1, "timelimit": 5}, f)
        os.chmod(target, 0o640)
        owner = (12345, 12345) if os.getuid() == 0 else (os.getuid(), os.getgid())
        if os.getuid() == 0:
            os.chown(target, *owner)
        os.symlink(target, self.path)
        config.write_back_disabled(self.path)
        self.assertTrue(os.path.islink(self.path), "the link stays a link")
        with open(target) as f:
            self.assertEqual(json.load(f), {"enable": 0, "timelimit": 5})
        st = os.stat(target)
        self.assertEqual((st.st_mode & 0o777, st.st_uid, st.st_gid), (0o640, *owner))

    def test_keys_for_cann_profilers_and_metric_enable_are_reported(self):
        keys = {"aclDataTypeConfig": "ACL_PROF_ACL_API", "aclprofAicoreMetrics": "PipeUtilization"}
        quiet = config.parse({"acl_prof_task_time_level": "L1", **keys})
        self.assertEqual(quiet.unused, (), "nothing to say while no operator collection is asked for")
        cfg = config.parse({"acl_task_time": 2, "acl_prof_task_time_level": "L1", "metric_enable": 1, **keys})
        self.assertTrue(cfg.metric_enable)
        self.assertEqual(cfg.warnings, (), "valid values, only not acted on")
        said = "\n".join(cfg.unused)
        for key in ("acl_prof_task_time_level", "aclprofAicoreMetrics", "aclDataTypeConfig"):
            self.assertIn(f"{key}=", said)
        self.assertIn("unused by acl_task_time 2 (MSPTI)", said)
        self.assertIn("metric_enable=1: MindIE's Prometheus metrics are not collected", said)


class WatchTest(TempDir):
    def test_two_edits_within_one_second_are_both_seen(self):
        self.write(enable=0)
        seen = []
        changed = threading.Event()

        def on_change():
            with open(self.path) as f:
                seen.append(json.load(f)["enable"])
            changed.set()

        watch = FileWatch(self.path, on_change)
        watch.start()
        self.addCleanup(watch.stop)
        for enable in (1, 0):
            changed.clear()
            self.write(enable=enable)
            self.assertTrue(changed.wait(2), "the edit was noticed")
        self.assertEqual(seen, [1, 0], "each edit reported once")


class SwitchTest(TempDir):
    def setUp(self):
        super().setUp()
        self.slot = ProfilerSlot()
        self.write(enable=0, prof_dir=os.path.join(self.dir, "prof"))
        self.source = ServiceSource(self.path, {"HOME": self.dir}, self.slot, CommandRouter())
        self.source.start()
        self.addCleanup(self.source.stop)

    def store(self):
        return api._active.store if api._active is not None else None

    def test_a_disabled_profiler_records_nothing_and_an_enabled_one_everything_asked(self):
        Profiler(Level.INFO).domain("Request").res("r0").event("httpReq")
        self.write(enable=1, prof_dir=os.path.join(self.dir, "prof"), domain="Request")
        wait(lambda: self.store() is not None, "recording")
        path = self.store().path
        Profiler(Level.INFO).domain("Request").res("r1").attr("k", 1).metric("recvTokenSize", 5).event(
            "httpReq"
        )
        with Profiler(Level.INFO).domain("Request").res(["r1", "r2"]).span_start("forward"):
            pass
        Profiler(Level.INFO).domain("KVCache").res("r1").event("swap")  # outside the domain list
        Profiler(Level.VERBOSE).domain("Request").event("debug")  # above INFO
        self.write(enable=0)
        wait(lambda: not os.path.exists(path + "-wal"), "the store to close")
        with closing(sqlite3.connect(path)) as db:
            rows = db.execute("SELECT name, cat, duration > 0, args, tid = track_id FROM slice").fetchall()
        self.assertEqual(
            rows,
            [
                ("httpReq", "Request", 0, '{"rid": "r1", "k": 1, "recvTokenSize=": 5, "type": 0}', 1),
                ("forward", "Request", 1, '{"rid": ["r1", "r2"], "type": 2}', 1),
            ],
        )

    def test_operator_collection_and_a_dynamic_window_exclude_each_other(self):
        self.assertIsNone(self.slot.claim("the service profiler's operator collection (acl_task_time 3)"))
        events = []
        tracer = Tracer(StepCounter(), events.append, slot=self.slot)
        text = configtext.render(DYNAMIC.keys, {"DYNAMIC_ACTION": "start", "DYNAMIC_OUTPUT": self.dir})
        tracer.accept(wire.Command(CommandKind.DYNAMIC, "w1", text))
        self.assertEqual(events[-1].phase, TracePhase.FAILED)
        self.assertIn("acl_task_time 3) runs in this process", events[-1].error)


class HostileFileTest(TempDir):
    """SERVICE_PROF_CONFIG_PATH is read by the .pth hook as every Python process starts: whatever it
    names, the interpreter starts at once and reads nothing without bound."""

    def start_python(self, path):
        """An interpreter that starts as the .pth hook has it start; its stderr, or a hang reported."""
        code = "import msmonitor_plugin._autostart; print('started')"
        env = dict(os.environ, SERVICE_PROF_CONFIG_PATH=path, PYTHONPATH=_plugin_path())
        env.pop("MSMONITOR_USE_DAEMON", None)
        try:
            out = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
            )
        except subprocess.TimeoutExpired:
            self.fail(f"the interpreter hung at start with the switch file {path}")
        self.assertEqual((out.returncode, out.stdout), (0, "started\n"), out.stderr[-2000:])
        return out.stderr

    def test_a_fifo_or_a_link_to_dev_zero_never_blocks_the_interpreters_start(self):
        os.mkfifo(self.path)  # no writer: open() without O_NONBLOCK waits for one forever
        self.start_python(self.path)
        zero = os.path.join(self.dir, "zero.json")
        os.symlink("/dev/zero", zero)  # read until MemoryError
        self.start_python(zero)

    def test_anything_but_a_small_regular_file_is_refused_saying_why(self):
        os.mkfifo(self.path)
        os.mkfifo(self.path + ".lock")  # the lock beside it, too: decided alone, not waited on
        big = os.path.join(self.dir, "big.json")
        with open(big, "w") as f:
            f.write(" " * config.MAX_FILE_BYTES + "{}")
        for path, why in (
            (self.path, "not a regular file (a FIFO)"),
            ("/dev/zero", "not a regular file (a device)"),
            (self.dir, "not a regular file (a folder)"),
            (big, "larger than 64 KiB"),
        ):
            with self.subTest(path=path), self.assertLogs("msmonitor_plugin", "WARNING") as logs:
                self.assertEqual(ServiceSwitch(path, {}, ProfilerSlot()).command().config, "")
            self.assertIn(why, logs.output[-1])

    def test_a_switch_file_that_cannot_be_made_is_one_line_on_stderr_and_python_runs_on(self):
        plain = os.path.join(self.dir, "plain")
        open(plain, "w").close()
        path = os.path.join(plain, "sub", "switch.json")  # a folder inside a regular file
        stderr = self.start_python(path)
        said = [line for line in stderr.splitlines() if "not creating the switch file" in line]
        self.assertEqual(len(said), 1, stderr)
        self.assertIn(f"SERVICE_PROF_CONFIG_PATH={path}", said[0])
        self.assertIn(f"cannot create its folder {os.path.dirname(path)}: Not a directory", said[0])


class SwitchFileCreationTest(TempDir):
    def test_a_missing_folder_is_made_and_the_file_is_made_as_touch_makes_one(self):
        for umask, file_mode, folder_mode in ((0o022, 0o644, 0o755), (0o002, 0o664, 0o775)):
            with self.subTest(umask=oct(umask)):
                old = os.umask(umask)
                self.addCleanup(os.umask, old)
                path = os.path.join(self.dir, oct(umask), "nested", "switch.json")
                self.assertTrue(config.ensure(path, {"HOME": "/home/u"}))
                os.umask(old)
                self.assertEqual(os.stat(path).st_mode & 0o777, file_mode, "a colleague may read it")
                for folder in (os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
                    self.assertEqual(os.stat(folder).st_mode & 0o777, folder_mode, folder)
                with open(path) as f:
                    self.assertEqual(json.load(f)["enable"], 0)


def _plugin_path():
    import msmonitor_plugin

    return os.path.dirname(os.path.dirname(msmonitor_plugin.__file__))


if __name__ == "__main__":
    unittest.main()
