"""Always-on, low-overhead monitoring inside the process (``dyno npu-monitor``).

The plugin's command handler uses :class:`Monitor` with a :class:`MonitorConfig` parsed from msMonitor's
npu-monitor keys; reports come back as :class:`Report`. Nothing here imports torch: the torch backend
uses the module the process imported itself. See docs/monitoring.md.
"""

from msmonitor_contract.activity import Kind
from msmonitor_contract.report import ChunkAssembler, KindStat, NameStat, Report, ReportError

from .config import ConfigError, ExportType, MonitorConfig
from .engine import ApplyResult, Monitor, MonitorError
from .records import Record

__all__ = [
    "ApplyResult",
    "ChunkAssembler",
    "ConfigError",
    "ExportType",
    "Kind",
    "KindStat",
    "Monitor",
    "MonitorConfig",
    "MonitorError",
    "NameStat",
    "Record",
    "Report",
    "ReportError",
]
