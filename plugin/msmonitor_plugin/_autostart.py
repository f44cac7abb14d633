"""Imported by ``msmonitor_plugin.pth`` at interpreter start when ``MSMONITOR_USE_DAEMON`` is set, or
msprof's ``PROFILING_MODE=dynamic`` (a job started for msprof's dynamic mode is attachable as it is), or
MindIE's ``SERVICE_PROF_CONFIG_PATH`` (the service profiler's switch file).

Which processes register: only job processes. Not this project's own tools (msMonitor's README has users
``export MSMONITOR_USE_DAEMON=1`` in the shell that also starts ``dynolog`` and runs ``dyno``); and not
every interpreter that inherits the variable — multiprocessing's resource tracker, a shell-out to a
Python tool — but those that import a framework (torch, torch_npu, MindSpore): the agent starts when
the import finishes. ``msmonitor_plugin.init()`` registers any process at once, and so does the
service profiler's switch file, which a framework-less service may use.
"""

import os
import sys

import msmonitor_plugin

OWN_TOOLS = ("dynolog", "dyno")
FRAMEWORKS = ("torch", "torch_npu", "mindspore")


def program() -> str:
    """What this interpreter runs, from the kernel (``sys.argv`` is not set yet while .pth files run):
    a script's name without its folder, or ``-m``'s module."""
    try:
        with open("/proc/self/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return ""
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "-m" and i + 1 < len(argv):
            return argv[i + 1]
        if arg == "-c":
            return ""
        if not arg.startswith("-"):
            return os.path.basename(arg)
    return ""


class _FrameworkImport:
    """A meta path finder that starts the agent once the first framework's import has finished."""

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname not in FRAMEWORKS or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(fullname)  # the finders after this one
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_then_start(module):  # type: ignore[no-untyped-def]
            original_exec(module)
            msmonitor_plugin.init()

        loader.exec_module = exec_then_start
        return spec


if program() not in OWN_TOOLS:
    if os.environ.get("SERVICE_PROF_CONFIG_PATH") or any(name in sys.modules for name in FRAMEWORKS):
        msmonitor_plugin.init()
    else:
        sys.meta_path.insert(0, _FrameworkImport())
