"""A service profiler recording (a ``prof_dir``) as the files MindIE's analyser writes
(``python -m ms_service_profiler.parse``): ``request.csv``, ``batch.csv``, ``forward.csv``,
``kvcache.csv``, ``request_status.csv``, ``chrome_tracing.json`` and ``profiler.db`` — what
``dyno service export`` writes, without pandas or CANN; ``--summary`` adds the summaries of
``msserviceprofiler analyze``.

It reads MindIE 26.0's recordings (``<prof_dir>/<MMDD-HHMM>/Trace_Service/ms_service_<host>-<pid>.db``,
``slice`` and its tables, as this plugin writes too), MindIE 8.3's (``Mstx``, no ``Trace_Service/``) and
this project's earlier ones: found and checked to be finished (:mod:`.discover`), read into one
:class:`~.model.Recording` of marks (:mod:`.read`, :mod:`.model`; request ids and batch types as the
analyser reads them, :mod:`.rids`, :mod:`.roles`), derived as the analyser derives (:mod:`.analysis`,
:mod:`.request_tables`, :mod:`.engine_tables` in its :mod:`.units`; :mod:`.curves`, :mod:`.summary`)
and written by format (:mod:`.reporters`). Standard library only.
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
    "check_finished",
    "find_inputs",
    "read_all",
    "write",
]
