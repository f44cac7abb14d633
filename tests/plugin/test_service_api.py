"""The ``ms_service_profiler`` API as MindIE 26.0 has it, each case written to a real store and read back
from MindIE's tables (standard library; Python 3.8 too)."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import unittest
from contextlib import closing

from msmonitor_plugin.service_profiler import api
from msmonitor_plugin.service_profiler.store import ServiceStore

PLUGIN = os.path.dirname(os.path.dirname(os.path.abspath(api.__file__)))
PLUGIN = os.path.dirname(PLUGIN)  # the folder holding msmonitor_plugin and ms_service_profiler


class Recorded(unittest.TestCase):
    """A recording at level INFO into a temporary store; :meth:`slices` closes it and reads it back."""

    domains = None

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="service-api")
        self.addCleanup(shutil.rmtree, self.dir)
        self.store = ServiceStore(self.dir)
        self.steps = []
        api.attach(api.Recording(20, self.domains, self.store, lambda: self.steps.append(1)))
        self.addCleanup(api.attach, None)

    def slices(self, columns="name, cat, args"):
        api.attach(None)
        self.store.close()
        with closing(sqlite3.connect(self.store.path)) as db:
            return db.execute(f"SELECT {columns} FROM slice ORDER BY id").fetchall()

    def messages(self):
        return [(name, json.loads(args)) for name, _, args in self.slices()]


class LevelTest(unittest.TestCase):
    def test_level_is_an_int_enum_with_mindie_names_and_spellings(self):
        from ms_service_profiler import Level

        self.assertTrue(issubclass(Level, int))
        self.assertEqual(
            [Level[n] for n in ("ERROR", "INFO", "DETAILED", "VERBOSE", "L0", "L1", "L2")],
            [10, 20, 30, 40, 10, 20, 30],
        )
        self.assertEqual(
            [
                Level[n]
                for n in (
                    "LEVEL_CORE_TRACE",
                    "LEVEL_OUTLIER_ENENT",
                    "LEVEL_NORMAL_TRACE",
                    "LEVEL_DETAILED_TRACE",
                )
            ],
            [10, 10, 20, 30],
        )

    def test_the_profiler_module_has_prof_step_and_mark_type(self):
        from ms_service_profiler.profiler import Level, MarkType, Profiler, prof_step  # noqa: F401

        self.assertEqual([int(t) for t in MarkType], [0, 1, 2, 3])
        from ms_service_profiler.mstx import service_profiler

        self.assertFalse(service_profiler.is_enable(10), "nothing records while the switch is off")


class ProfilerTest(Recorded):
    def test_enable_is_a_property_and_a_level_may_be_named(self):
        from ms_service_profiler import Level, Profiler

        self.assertTrue(Profiler("INFO").enable and Profiler(Level.L1).is_enable())
        self.assertFalse(Profiler("VERBOSE").enable, "above the recording's INFO")
        self.assertFalse(Profiler(Level.DETAILED).enable)

    def test_the_message_is_mindies(self):
        from ms_service_profiler import Level, Profiler

        prof = Profiler(Level.INFO).domain("Request").res("r1").metric("recvTokenSize", 16)
        prof.metric_inc("tokens", 1).metric_scope("QueueName", "WAITING").attr("k", "v").event("httpReq")
        Profiler(Level.INFO).domain("Schedule").metric_scope_as_req_id().launch()
        Profiler(Level.INFO).domain("Request").link("r1", "r1-child")
        self.assertEqual(
            self.messages(),
            [
                (
                    "httpReq",
                    {
                        "rid": "r1",
                        "recvTokenSize=": 16,
                        "tokens+": 1,
                        "scope#QueueName": "WAITING",
                        "k": "v",
                        "type": 0,
                    },
                ),
                ("Launch", {"scope#": "req", "type": 0}),
                ("Link", {"type": 3, "from": "r1", "to": "r1-child"}),
            ],
        )

    def test_a_batch_res_lists_each_request_with_its_iteration(self):
        from ms_service_profiler import Level, Profiler

        batch = [{"rid": "r1", "iter_size": 0}, {"rid": "r2", "iter_size": 3}]
        with (
            Profiler(Level.INFO)
            .domain("Schedule")
            .res(batch)
            .metric("batch_size", 2)
            .span_start("BatchSchedule")
        ):
            pass
        ((name, cat, args, duration),) = self.slices("name, cat, args, duration")
        self.assertEqual((name, cat), ("BatchSchedule", "Schedule"))
        self.assertEqual(json.loads(args), {"rid": batch, "batch_size=": 2, "type": 2})
        self.assertGreaterEqual(duration, 0)

    def test_a_profiler_used_again_keeps_what_it_recorded(self):
        from ms_service_profiler import Level, Profiler

        prof = Profiler(Level.INFO).domain("Request").res("r1")
        prof.event("first")
        prof.metric("later", 1).event("second")
        self.assertEqual(
            self.messages(),
            [("first", {"rid": "r1", "type": 0}), ("second", {"rid": "r1", "type": 0, "later=": 1})],
        )

    def test_a_step_is_prof_step_alone(self):
        from ms_service_profiler import Level, Profiler
        from ms_service_profiler.profiler import prof_step

        with Profiler(Level.INFO).domain("ModelExecute").span_start("forward"):
            pass
        Profiler(Level.INFO).domain("ModelExecute").event("modelRunnerExec")
        self.assertEqual(self.steps, [], "spans and events named like steps are not steps")
        prof_step()
        prof_step(stop_check=True)
        self.assertEqual(self.steps, [1])

    def test_tid_is_the_os_thread_id_and_each_thread_has_its_track(self):
        from ms_service_profiler import Level, Profiler

        tids = []

        def work():
            tids.append(threading.get_native_id())
            Profiler(Level.INFO).domain("Worker").event("job")

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        Profiler(Level.INFO).domain("Main").event("job")
        rows = self.slices("tid, track_id")
        self.assertEqual(rows, [(tids[0], tids[0]), (threading.get_native_id(), threading.get_native_id())])
        with closing(sqlite3.connect(self.store.path)) as db:
            names = {name for (name,) in db.execute("SELECT thread_name FROM thread")}
            meta = dict(db.execute("SELECT name, value FROM Meta"))
        self.assertEqual(names, {f"Worker({tids[0]})", f"Main({threading.get_native_id()})"})
        self.assertNotIn("pid", meta, "a Meta name becomes a column of every row in MindIE's analyser")
        self.assertEqual(meta["ppid"], str(os.getppid()))

    def test_meta_info_and_the_c_entry_points(self):
        from ms_service_profiler import Level, Profiler
        from ms_service_profiler.mstx import service_profiler

        Profiler(Level.INFO).add_meta_info("dpRankId", 1)
        handle = service_profiler.start_span("native")
        service_profiler.span_end_ex("native", "Execute", '{"type": 2}', handle)
        service_profiler.mark_event('{"name": "old", "domain": "Request", "rid": "r9", "type": 0}')
        self.assertEqual(
            self.slices(),
            [("native", "Execute", '{"type": 2}'), ("old", "Request", '{"rid": "r9", "type": 0}')],
        )
        with closing(sqlite3.connect(self.store.path)) as db:
            self.assertEqual(
                db.execute("SELECT value, slice FROM Meta WHERE name = 'dpRankId'").fetchall(), [("1", "")]
            )


class DomainTest(Recorded):
    domains = frozenset({"Request"})

    def test_a_domain_outside_the_list_disables(self):
        from ms_service_profiler import Level, Profiler

        prof = Profiler(Level.INFO).domain("KVCache")
        self.assertFalse(prof.enable)
        prof.res("r1").event("swap")
        Profiler(Level.INFO).domain("Request").event("httpReq")
        self.assertEqual([name for name, _, _ in self.slices()], ["httpReq"])


class CoexistenceTest(unittest.TestCase):
    """Another ms_service_profiler after this plugin's on the path: MindIE's package, with a profiler, and
    a module this plugin's has not (its analyser's parse)."""

    PROBE = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "import ms_service_profiler, ms_service_profiler.profiler as p, ms_service_profiler.parse\n"
        "print(getattr(p.Profiler, 'REAL', False), ms_service_profiler.Profiler is p.Profiler)\n"
        "from msmonitor_plugin.agent import _service_source\n"
        "from msmonitor_plugin.router import CommandRouter\n"
        "from msmonitor_plugin.slot import ProfilerSlot\n"
        "env = {'SERVICE_PROF_CONFIG_PATH': sys.argv[1]}\n"
        "print(_service_source(env, ProfilerSlot(), CommandRouter()) is not None)\n"
    )

    def setUp(self):
        self.other = tempfile.mkdtemp(prefix="cann")
        self.addCleanup(shutil.rmtree, self.other)
        os.mkdir(os.path.join(self.other, "ms_service_profiler"))
        for name, text in (
            ("__init__.py", "from ms_service_profiler.profiler import Profiler\n"),
            ("profiler.py", "class Profiler:\n    REAL = True\n"),
            ("parse.py", ""),
        ):
            with open(os.path.join(self.other, "ms_service_profiler", name), "w") as f:
                f.write(text)
        self.config = os.path.join(self.other, "ms_service_profiler_config.json")

    def probe(self, **env):
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([PLUGIN, self.other]),
            "LD_LIBRARY_PATH": "",
            **env,
        }
        out = subprocess.run(
            [sys.executable, "-c", self.PROBE, self.config],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.splitlines()

    def test_with_its_library_mindie_records_and_this_plugin_steps_aside_saying_so_once(self):
        with open(os.path.join(self.other, "libms_service_profiler.so"), "w"):
            pass  # found, not loaded
        lines = self.probe(LD_LIBRARY_PATH=self.other)
        self.assertEqual(lines[-2:], ["True True", "False"], "its API, and no switch of ours beside its own")
        self.assertEqual(sum("step aside" in line for line in lines), 1, lines)
        self.assertFalse(os.path.exists(self.config), "the file is left to MindIE's own manager")

    def test_without_it_this_plugin_records_and_the_other_modules_stay_importable(self):
        lines = self.probe()
        self.assertEqual(
            lines[-2:], ["False True", "True"], "this plugin's API and switch; its parse imports"
        )
        self.assertEqual(sum("not found, so msMonitor records" in line for line in lines), 1, lines)


if __name__ == "__main__":
    unittest.main()
