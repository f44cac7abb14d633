"""Another ``ms_service_profiler`` on sys.path: CANN's (with MindIE's C library,
``libms_service_profiler.so``) or MindIE's Python package from its source (its analyser, its vLLM/SGLang
patcher) without that library.

- With the library, MindIE records: this plugin's package of that name steps aside for it (becomes it),
  and so does the switch, since MindIE's own manager watches ``SERVICE_PROF_CONFIG_PATH``.
- Without it, MindIE's Profiler would record nothing: this plugin's API and switch stay, and the other
  package's remaining modules (``parse``, ``patcher``, ...) are importable through this one.

Said once in the log.
"""

from __future__ import annotations

import importlib.machinery
import logging
import os
import sys
from typing import Mapping, Optional

log = logging.getLogger("msmonitor_plugin")

PACKAGE = "ms_service_profiler"
LIBRARY = "libms_service_profiler.so"
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
            return None if "msmonitor_plugin" in f.read() else spec  # not a copy of this plugin's
    except OSError:
        return None


def cann_library(env: Mapping[str, str] = os.environ) -> Optional[str]:
    """MindIE's C library where its loader looks (``$ASCEND_HOME_PATH/<arch>-linux/lib64``, then the
    dynamic loader's ``LD_LIBRARY_PATH``), without loading it."""
    home = env.get("ASCEND_HOME_PATH", "")
    folders = (
        [os.path.join(home, arch, "lib64") for arch in ("aarch64-linux", "x86_64-linux")] if home else []
    )
    folders += [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    return next((os.path.join(f, LIBRARY) for f in folders if os.path.isfile(os.path.join(f, LIBRARY))), None)


def mindie_records() -> Optional[importlib.machinery.ModuleSpec]:
    """The other package, when it has its library: then it records, and this plugin steps aside."""
    other = other_package()
    if other is None:
        return None
    library = cann_library()
    if library is None:
        _say(
            f"{PACKAGE}: {LIBRARY} not found, so msMonitor records;"
            f" {other.origin}'s other modules stay importable"
        )
        return None
    _say(f"{PACKAGE}: using {other.origin} with {library}; msMonitor's own API and switch step aside")
    return other


def _say(line: str) -> None:
    global _said
    if not _said:
        _said = True
        log.info("%s", line)
