"""Imported by ``msmonitor_plugin.pth`` at interpreter start when ``MSMONITOR_USE_DAEMON`` is set, or
msprof's ``PROFILING_MODE=dynamic`` (a job started for msprof's dynamic mode is attachable as it is), or
MindIE's ``SERVICE_PROF_CONFIG_PATH`` (the service profiler's switch file)."""

import msmonitor_plugin

msmonitor_plugin.init()
