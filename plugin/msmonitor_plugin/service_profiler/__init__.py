"""MindIE's service profiler, in this plugin: a JSON file switches recording of an inference service's
spans, events and metrics on and off (``SERVICE_PROF_CONFIG_PATH``), and this package's API records them
in MindIE 26.0's layout and tables.

Importing it loads only the API; the switch, its watcher and the store are started by the agent.
"""

from msmonitor_contract.service_tables import MarkType

from .api import Level, Profiler, prof_step

__all__ = ["Level", "MarkType", "Profiler", "prof_step"]
