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
from msmonitor_plugin.imports import after_import

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


def _start(framework: object) -> None:
    msmonitor_plugin.init()


if program() not in OWN_TOOLS:
    if os.environ.get("SERVICE_PROF_CONFIG_PATH") or any(name in sys.modules for name in FRAMEWORKS):
        msmonitor_plugin.init()
    else:
        after_import(FRAMEWORKS, _start)
