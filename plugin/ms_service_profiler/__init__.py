"""``ms_service_profiler``'s instrumentation API, for code written for MindIE's service profiler (the
vLLM and SGLang hooks of the msserviceprofiler package, a service's own ``Profiler(...)`` calls): the
same names, recorded by ``msmonitor_plugin.service_profiler``."""

from msmonitor_plugin.service_profiler import Level, Profiler, prof_step

__all__ = ["Level", "Profiler", "prof_step"]
