"""``ms_service_profiler``'s instrumentation API, for code written for MindIE's service profiler (the
vLLM and SGLang hooks of the msserviceprofiler package, a service's own ``Profiler(...)`` calls): the
same names, recorded by ``msmonitor_plugin.service_profiler``.

Where CANN's ``ms_service_profiler`` is importable with its C library, this one steps aside: it becomes
that package (its ``__init__`` run here, its folder this package's path). Where another one is importable
without the library (MindIE's source: its analyser, its patcher), its modules this one lacks are
importable through this one (:mod:`msmonitor_plugin.service_profiler.coexist`).
"""

from msmonitor_plugin.service_profiler.coexist import mindie_records, other_package

_mindie = mindie_records()
if _mindie is not None and _mindie.origin and _mindie.submodule_search_locations:
    __path__[:] = list(_mindie.submodule_search_locations)
    __file__ = _mindie.origin
    with open(_mindie.origin, encoding="utf-8") as _source:
        exec(compile(_source.read(), _mindie.origin, "exec"))  # the other package's __init__, as this module
else:
    from msmonitor_plugin.service_profiler import Level, Profiler, prof_step

    _other = other_package()
    if _other is not None and _other.submodule_search_locations:
        __path__.extend(_other.submodule_search_locations)  # after this folder: its parse, patcher, ...
    __all__ = ["Level", "Profiler", "prof_step"]
