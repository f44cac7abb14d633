"""``ms_service_profiler``'s instrumentation API, for code written for MindIE's service profiler (the
vLLM and SGLang hooks of the msserviceprofiler package, a service's own ``Profiler(...)`` calls): the
same names, recorded by ``msmonitor_plugin.service_profiler``.

Where another ``ms_service_profiler`` is importable (CANN's, or MindIE's analyser from its source), this
one steps aside: it becomes that package (its ``__init__`` run here, its folder this package's path), so
``ms_service_profiler.parse`` and CANN's recorder work as if this one were not installed
(:mod:`msmonitor_plugin.service_profiler.coexist`).
"""

from msmonitor_plugin.service_profiler.coexist import other_package

_other = other_package()
if _other is not None and _other.origin and _other.submodule_search_locations:
    __path__[:] = list(_other.submodule_search_locations)
    __file__ = _other.origin
    with open(_other.origin, encoding="utf-8") as _source:
        exec(compile(_source.read(), _other.origin, "exec"))  # the other package's __init__, as this module
else:
    from msmonitor_plugin.service_profiler import Level, Profiler, prof_step

    __all__ = ["Level", "Profiler", "prof_step"]
