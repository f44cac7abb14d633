"""``npumonitor``: msMonitor's npu-monitor keys (reference/msmonitor.md §3.2), plus this project's TOP_N.
Empty values stay empty: torch_npu keeps ``KEY=`` lines. :class:`~..monitor.config.MonitorConfig`
validates them; the monitor, not the tracer, runs the command."""

from __future__ import annotations

from typing import Any

from msmonitor_contract import vocabulary as v
from msmonitor_contract.configtext import BOOL, FLOAT, INT, LIST, TEXT, FieldKeys, Key, Table, by_key, render

KEYS: Table = (
    Key("NPU_MONITOR_START", BOOL, False, required=True),
    Key("NPU_MONITOR_STOP", BOOL, False, required=True),
    Key("REPORT_INTERVAL_S", INT, v.DEFAULT_REPORT_INTERVAL_S, required=True),
    Key("DURATION", FLOAT, 0.0, required=True),
    Key("MSPTI_ACTIVITY_KIND", LIST, v.split_list(v.DEFAULT_MONITOR_KINDS), required=True),
    Key("NPU_MONITOR_LOG_FILE", TEXT, required=True),
    Key("NPU_MONITOR_EXPORT_TYPE", TEXT, v.DEFAULT_MONITOR_EXPORT, required=True),
    Key("JSONL_ROTATE_LOG_LINES", TEXT),
    Key("JSONL_ROTATE_LOG_FILES", TEXT),
    Key("NPU_MONITOR_FILTER", TEXT),
    Key("TOP_N", INT, v.DEFAULT_TOP_N),
)

# The fields of a command (dyno's NpuMonitorRequest, the daemon's command) that are keys, by name.
FIELD_KEYS: FieldKeys = (
    ("start", "NPU_MONITOR_START"),
    ("stop", "NPU_MONITOR_STOP"),
    ("report_interval_s", "REPORT_INTERVAL_S"),
    ("duration_s", "DURATION"),
    ("activity_kinds", "MSPTI_ACTIVITY_KIND"),
    ("log_file", "NPU_MONITOR_LOG_FILE"),
    ("export_type", "NPU_MONITOR_EXPORT_TYPE"),
    ("jsonl_rotate_log_lines", "JSONL_ROTATE_LOG_LINES"),
    ("jsonl_rotate_log_files", "JSONL_ROTATE_LOG_FILES"),
    ("filter", "NPU_MONITOR_FILTER"),
    ("top_n", "TOP_N"),
)


def render_command(command: Any, top_n: bool = True) -> str:
    """An npu-monitor's text from a command with the FIELD_KEYS fields, with msMonitor's defaults for the
    kinds and the export; *top_n* False leaves out this project's TOP_N (msMonitor's plugin reads no such
    key, for dyno's request to msMonitor's daemon)."""
    values = {
        **by_key(FIELD_KEYS, command),
        "MSPTI_ACTIVITY_KIND": list(command.activity_kinds) or v.split_list(v.DEFAULT_MONITOR_KINDS),
        "NPU_MONITOR_EXPORT_TYPE": command.export_type or v.DEFAULT_MONITOR_EXPORT,
        "TOP_N": command.top_n or v.DEFAULT_TOP_N,
    }
    if not top_n:
        del values["TOP_N"]
    return render(KEYS, values)
