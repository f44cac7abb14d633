"""Imported by ``msmonitor_plugin.pth`` at interpreter start when ``MSMONITOR_USE_DAEMON`` is set, or
msprof's ``PROFILING_MODE=dynamic`` (a job started for msprof's dynamic mode is attachable as it is), or
MindIE's ``SERVICE_PROF_CONFIG_PATH`` (the service profiler's switch file).

Not in this project's own tools: msMonitor's README has users ``export MSMONITOR_USE_DAEMON=1`` in the
shell that also starts ``dynolog`` and runs ``dyno``, which must not register themselves as jobs.
"""

import os

import msmonitor_plugin

OWN_TOOLS = ("dynolog", "dyno")


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


if program() not in OWN_TOOLS:
    msmonitor_plugin.init()
