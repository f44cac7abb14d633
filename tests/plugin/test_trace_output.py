"""A trace's folder, opened when the trace is accepted and written through (trace/output.py): confined
to the daemon's --trace-root following no link below it, proof against a folder swapped for a link
afterwards, and what is written left 0640/0750 (runs on Python 3.8 too)."""

import os
import socket
import stat
import sys
import tempfile
import types
import unittest
from unittest import mock

from msmonitor_contract import configtext, wire
from msmonitor_contract.kinds import DYNAMIC
from msmonitor_contract.vocabulary import CommandKind
from msmonitor_plugin.trace.npu_recorder import NpuRecorder
from msmonitor_plugin.trace.output import open_output
from msmonitor_plugin.trace.recorder import RecorderError
from msmonitor_plugin.trace.recorders import check_output
from msmonitor_plugin.trace.spec import parse


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


class OutputFolderTest(unittest.TestCase):
    def setUp(self):
        base = tempfile.TemporaryDirectory()
        self.addCleanup(base.cleanup)
        self.root = os.path.join(base.name, "root")
        self.outside = os.path.join(base.name, "outside")
        os.mkdir(self.root)
        os.mkdir(self.outside)
        umask = os.umask(0o022)  # as most jobs run
        self.addCleanup(os.umask, umask)

    def opened(self, path):
        folder = open_output(path, [self.root])
        self.addCleanup(folder.close)
        return folder

    def test_missing_folders_are_made_0750_from_the_root(self):
        self.opened(os.path.join(self.root, "a", "b"))
        self.assertEqual((mode(f"{self.root}/a"), mode(f"{self.root}/a/b")), (0o750, 0o750))

    def test_a_link_below_the_root_is_refused_even_to_a_folder_inside_it(self):
        os.mkdir(f"{self.root}/real")
        for target in (self.outside, f"{self.root}/real"):
            with self.subTest(target=target):
                os.symlink(target, f"{self.root}/link")
                with self.assertRaisesRegex(OSError, "'link' is a symbolic link below the --trace-root"):
                    open_output(f"{self.root}/link/x", [self.root])
                os.unlink(f"{self.root}/link")
        self.assertEqual(os.listdir(self.outside), [])

    def test_a_path_outside_the_roots_or_with_dots_is_refused(self):
        for path in (self.outside, f"{self.root}/../outside", "relative/path"):
            with self.subTest(path=path), self.assertRaises(OSError) as refused:
                open_output(path, [self.root])
            self.assertIn("--trace-root", refused.exception.strerror)

    def test_a_root_that_is_a_link_is_the_root_by_either_name(self):
        alias = os.path.join(os.path.dirname(self.root), "alias")
        os.symlink(self.root, alias)  # the operator's root may itself be a link
        for path in (f"{alias}/a", f"{self.root}/b"):
            folder = open_output(path, [alias])
            self.addCleanup(folder.close)
        self.assertEqual(sorted(os.listdir(self.root)), ["a", "b"])

    def test_a_folder_swapped_for_a_link_after_opening_is_still_the_one_written_and_is_told(self):
        folder = self.opened(f"{self.root}/job")
        os.rename(f"{self.root}/job", f"{self.root}/job.moved")
        os.symlink(self.outside, f"{self.root}/job")
        into, made = folder.sub("PROF_1")
        self.addCleanup(into.close)
        with open(into.reach("trace.json"), "w") as f:  # as torch.profiler writes: by the path given
            f.write("{}")
        self.assertTrue(made)
        self.assertEqual(os.listdir(self.outside), [])
        self.assertEqual(os.listdir(f"{self.root}/job.moved/PROF_1"), ["trace.json"])
        with self.assertRaisesRegex(OSError, "was replaced while the trace recorded"):
            into.check_unmoved()

    def test_an_unmoved_folder_passes_the_check(self):
        folder = self.opened(f"{self.root}/job")
        into, _ = folder.sub("run")
        self.addCleanup(into.close)
        into.check_unmoved()
        self.assertEqual(into.path, f"{self.root}/job/run")

    def test_seal_leaves_files_0640_and_folders_0750_and_follows_no_link(self):
        folder = self.opened(f"{self.root}/job")
        os.makedirs(f"{self.root}/job/run/sub")
        for path in (f"{self.root}/job/run/sub/a.json", f"{self.root}/job/b.json", f"{self.outside}/victim"):
            with open(path, "w") as f:
                f.write("x")
            os.chmod(path, 0o666)
        os.chmod(f"{self.root}/job/run", 0o777)
        os.symlink(f"{self.outside}/victim", f"{self.root}/job/run/link")
        folder.seal("run")
        folder.seal("b.json")
        self.assertEqual(mode(f"{self.root}/job/run"), 0o750)
        self.assertEqual(mode(f"{self.root}/job/run/sub"), 0o750)
        self.assertEqual(mode(f"{self.root}/job/run/sub/a.json"), 0o640)
        self.assertEqual(mode(f"{self.root}/job/b.json"), 0o640)
        self.assertEqual(mode(f"{self.outside}/victim"), 0o666, "a link's target is not ours to change")

    def test_without_roots_any_folder_is_opened_links_included(self):
        os.symlink(self.outside, f"{self.root}/link")
        folder = open_output(f"{self.root}/link/a", [])
        self.addCleanup(folder.close)
        folder.check_unmoved()  # nothing to hold it to
        self.assertEqual(mode(f"{self.outside}/a"), 0o750)


if __name__ == "__main__":
    unittest.main()


class FakeNpuProfile:
    """torch_npu's profiler as the recorder drives it: its handler writes by the folder's name."""

    def __init__(self, on_trace_ready=None, **options):
        self.on_trace_ready, self.step_num = on_trace_ready, 0

    def start(self):
        pass

    def stop(self):
        self.on_trace_ready(self)


def fake_torch_npu():
    def tensorboard_trace_handler(dir_name, analyse_flag=True, async_mode=False):
        def write(profile):
            folder = os.path.join(dir_name, f"{socket.gethostname()}_{os.getpid()}_1_ascend_pt")
            os.makedirs(folder)
            with open(os.path.join(folder, "profiler_info.json"), "w") as f:
                f.write("{}")

        return write

    names = types.SimpleNamespace
    module = types.ModuleType("torch_npu")
    module.npu = names(is_initialized=lambda: True)
    module.profiler = names(
        ProfilerActivity=names(CPU="CPU", NPU="NPU"),
        ProfilerLevel=names(Level0=0, Level1=1),
        AiCMetrics=names(AiCoreNone=0),
        _ExperimentalConfig=lambda **options: options,
        tensorboard_trace_handler=tensorboard_trace_handler,
        profile=FakeNpuProfile,
    )
    return module


class NpuRecorderTest(unittest.TestCase):
    """torch_npu writes by the folder's name: the plugin makes the window's folder, checks it is the one
    opened before torch_npu starts and after it wrote, and seals what it wrote."""

    def setUp(self):
        base = tempfile.TemporaryDirectory()
        self.addCleanup(base.cleanup)
        self.root, self.outside = os.path.join(base.name, "root"), os.path.join(base.name, "outside")
        os.mkdir(self.root)
        os.mkdir(self.outside)
        umask = os.umask(0o022)
        self.addCleanup(os.umask, umask)
        patched = mock.patch.dict(sys.modules, {"torch_npu": fake_torch_npu()})
        patched.start()
        self.addCleanup(patched.stop)
        text = configtext.render(
            DYNAMIC.keys, {"DYNAMIC_ACTION": "start", "DYNAMIC_OUTPUT": f"{self.root}/job"}
        )
        self.spec = parse(wire.Command(CommandKind.DYNAMIC, "w1", text))
        check_output(self.spec, [self.root])
        self.addCleanup(self.spec.folder.close)

    def test_the_window_is_written_where_accepted_owner_and_group_only(self):
        recorder = NpuRecorder(self.spec)
        self.addCleanup(recorder.close)
        recorder.start(first_step=0)
        recorder.stop()
        (written,) = recorder.write()
        self.assertTrue(written.startswith(f"{self.root}/job/PROF_"), written)
        self.assertEqual((mode(os.path.dirname(written)), mode(written)), (0o750, 0o750))
        self.assertEqual(mode(os.path.join(written, "profiler_info.json")), 0o640)

    def test_a_folder_swapped_for_a_link_while_recording_fails_the_window(self):
        recorder = NpuRecorder(self.spec)
        self.addCleanup(recorder.close)
        os.rename(f"{self.root}/job", f"{self.root}/job.accepted")
        os.symlink(self.outside, f"{self.root}/job")
        with self.assertRaisesRegex(RecorderError, "was replaced while the trace recorded"):
            recorder.write()
