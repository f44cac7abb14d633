"""A service profiler recording (a ``prof_dir``) as files people open: a Chrome/Perfetto trace, CSV
tables and one merged SQLite database — what ``dyno service export`` writes.

The plugin records each process of an inference service into
``<prof_dir>/<MMDD-HHMM>/Trace_Service/ms_service_<host>-<pid>.db`` and, with operator timing on,
``ascend_service_profiler_<host>-<pid>.db`` beside it; their tables are the plugin's
:mod:`msmonitor_plugin.service_profiler.schema`. Here they are found and checked to be finished
(:mod:`.discover`), read into one :class:`~.model.Recording` of typed rows (:mod:`.read`, :mod:`.model`;
per request: :mod:`.per_request`) and written by format (:mod:`.reporters`). Standard library only.
"""

from .discover import (
    OPERATOR_PREFIX,
    SERVICE_PREFIX,
    TRACE_DIR,
    ExportError,
    Inputs,
    check_finished,
    find_inputs,
)
from .model import Process, Recording
from .per_request import Request, requests
from .read import read_all
from .reporters import FORMATS, write

__all__ = [
    "FORMATS",
    "OPERATOR_PREFIX",
    "SERVICE_PREFIX",
    "TRACE_DIR",
    "ExportError",
    "Inputs",
    "Process",
    "Recording",
    "Request",
    "check_finished",
    "find_inputs",
    "read_all",
    "requests",
    "write",
]
