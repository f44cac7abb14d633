"""``ms_service_profiler.profiler``, as MindIE 26.0 has it: the API, ``prof_step`` and ``MarkType``."""

from msmonitor_contract.service_tables import MarkType
from msmonitor_plugin.service_profiler.api import Level, Profiler, prof_step

__all__ = ["Level", "MarkType", "Profiler", "prof_step"]
