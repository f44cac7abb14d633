"""Another ``ms_service_profiler`` (CANN's, with MindIE's C library; or MindIE's analyser from its source)
comes first: this plugin's package of that name steps aside for it, and so does the switch, since
MindIE's own manager then watches ``SERVICE_PROF_CONFIG_PATH`` and records. Said once in the log."""

from __future__ import annotations

import importlib.machinery
import logging
import os
import sys
from typing import Optional

log = logging.getLogger("msmonitor_plugin")

PACKAGE = "ms_service_profiler"
# Both of this plugin's top-level packages sit in one folder (plugin/ here, site-packages when installed).
_OURS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_said = False


def other_package() -> Optional[importlib.machinery.ModuleSpec]:
    """The spec of an ``ms_service_profiler`` on sys.path that is not this plugin's (nor a copy of it)."""
    elsewhere = [p for p in sys.path if os.path.abspath(p or os.curdir) != _OURS]
    spec = importlib.machinery.PathFinder.find_spec(PACKAGE, elsewhere)
    if spec is None or not spec.origin or not spec.submodule_search_locations:
        return None
    try:
        with open(spec.origin, encoding="utf-8") as f:
            ours = "msmonitor_plugin" in f.read()  # a copy of this plugin's, installed twice
    except OSError:
        return None
    if not ours:
        _say(spec.origin)
    return None if ours else spec


def _say(origin: str) -> None:
    global _said
    if not _said:
        _said = True
        log.info("%s: using %s; msMonitor's own API and switch step aside", PACKAGE, origin)
