"""``ms_service_profiler``'s instrumentation API, for code written for MindIE's service profiler (the
vLLM and SGLang hooks of the msserviceprofiler package, a service's own ``Profiler(...)`` calls): the
same names, recorded by ``msmonitor_plugin.service_profiler``.

Where another ``ms_service_profiler`` is importable (CANN's, or MindIE's analyser from its source), this
one steps aside: it becomes that package (its ``__init__`` run here, its folder this package's path), so
``ms_service_profiler.parse`` and CANN's recorder work as if this one were not installed; logged once.
"""

import importlib.machinery
import logging
import os
import sys

_OURS = "msmonitor_plugin"  # in this file's text, not in the real package's


def _other_package():
    """The spec of an ``ms_service_profiler`` elsewhere on sys.path that is not this one (nor a copy)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    elsewhere = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec(__name__, elsewhere)
    if spec is None or not spec.origin or not spec.submodule_search_locations:
        return None
    try:
        with open(spec.origin, encoding="utf-8") as f:
            return None if _OURS in f.read() else spec
    except OSError:
        return None


_other = _other_package()
if _other is not None:
    logging.getLogger(_OURS).info(
        "ms_service_profiler: using %s (msMonitor's own steps aside)", _other.origin
    )
    __path__[:] = list(_other.submodule_search_locations)
    __file__ = _other.origin
    with open(_other.origin, encoding="utf-8") as _source:
        exec(compile(_source.read(), _other.origin, "exec"))  # the other package's __init__, as this module
else:
    from msmonitor_plugin.service_profiler import Level, Profiler, prof_step

    __all__ = ["Level", "Profiler", "prof_step"]
