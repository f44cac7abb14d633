"""``npumonitor``: msMonitor's npu-monitor, declared once: its keys (reference/msmonitor.md §3.2) in the
order its ``dyno`` writes them, plus this project's TOP_N (which msMonitor's plugin does not read) and
``--auto-trace``, which has no key (the daemon runs it). Empty values stay empty: torch_npu keeps
``KEY=`` lines."""

from __future__ import annotations

from typing import Any, Dict, List

from .. import rules
from .. import vocabulary as v
from ..rules import FieldError
from ..schema import Field, KeyOf, Kind, Message, Usage, given
from ..targets import TARGETS
from ..values import BOOL, FLOAT, INT, NAMES, TEXT, FlagValueError

ACTIVITY_KINDS = (
    "Marker",
    "Kernel",
    "API",
    "Hccl",
    "Memory",
    "MemSet",
    "MemCpy",
    "Communication",
    "AclAPI",
    "NodeAPI",
    "RuntimeAPI",
)
EXPORT_TYPES = ("DB", "Jsonl")

# --- --auto-trace ----------------------------------------------------------------------------------

_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _percent(text: str) -> float:
    return float(text[:-1] if text.endswith("%") else text) / 100


def _seconds(text: str) -> int:
    unit = text[-1:] if text[-1:] in _UNITS_S else "s"
    return int(float(text[:-1] if text.endswith(unit) else text) * _UNITS_S[unit])


def _per_day(text: str) -> int:
    return int(text[: -len("/day")] if text.endswith("/day") else text)


# Each key as a user types it in --auto-trace's text (its "flag"), its default, and its help: the form
# its value takes there.
AUTO_TRACE = Message(
    "AutoTrace",
    (
        Field("slowdown", FLOAT, "25%", default=0.25, flag="slowdown", parse=_percent),
        Field("for_intervals", INT, "3", default=3, flag="for", parse=int),
        Field("iterations", INT, "2", default=2, flag="iterations", parse=int),
        Field("cooldown_s", INT, "30m (s, m, h, d)", default=30 * 60, flag="cooldown", parse=_seconds),
        Field("max_per_day", INT, "3/day", default=3, flag="max", parse=_per_day),
    ),
)
# (field, lowest, highest): the ranges its integer keys must be in
_AUTO_TRACE_RANGES = (("for_intervals", 1, 100), ("iterations", 1, 1000), ("max_per_day", 1, 10_000))


def auto_trace(text: str) -> Any:
    """``slowdown=25%,for=3,iterations=2,cooldown=30m,max=3/day`` (any of the keys; ``on``: the defaults)
    as an AutoTrace; each key left out takes its default. Raises FlagValueError naming the key."""
    by_key = {f.flag: f for f in AUTO_TRACE.fields}
    values: Dict[str, Any] = {f.name: f.default for f in AUTO_TRACE.fields}
    for item in v.split_list("" if text == "on" else text):
        key, _, value = item.partition("=")
        if key not in by_key:
            raise FlagValueError(f"unknown key {key!r} in {text!r} (keys: {', '.join(by_key)})")
        f = by_key[key]
        try:
            values[f.name] = f.reads(value.strip())
        except ValueError:
            raise FlagValueError(f"{key}={value!r} does not read as {f.help}") from None
    return AUTO_TRACE.build(values)


def _auto_trace_ranges(field: str, a: Any) -> List[FieldError]:
    errors = []
    if not 0 < a.slowdown <= 10:
        errors.append(FieldError(field, f"slowdown must be in 0..1000 % (above 0), got {a.slowdown:.0%}"))
    for name, low, high in _AUTO_TRACE_RANGES:
        value = getattr(a, name)
        if not low <= value <= high:
            key = AUTO_TRACE.field(name).flag
            errors.append(FieldError(field, f"{key} must be in {low}..{high}, got {value}"))
    return errors


# --- the command -----------------------------------------------------------------------------------


def _check(request: Any) -> List[FieldError]:
    errors = []
    if request.start and request.stop:
        errors.append(FieldError("start", f"and {NPUMONITOR.flag('stop')} exclude each other"))
    if given(request, "auto_trace"):
        if not request.start:
            errors.append(FieldError("auto_trace", f"goes with {NPUMONITOR.flag('start')}"))
        errors += _auto_trace_ranges("auto_trace", request.auto_trace)
    return errors


def _export_type(field: str, value: str) -> List[FieldError]:
    if value.lower() in ("", "db", "jsonl"):
        return []
    return [FieldError(field, f"must be DB or Jsonl, got {rules.quoted(value)}")]


def _required(name: str) -> KeyOf:
    """A key msMonitor's plugin refuses a command without."""
    return KeyOf(name, required=True)


NPUMONITOR = Kind(
    v.CommandKind.NPUMONITOR,
    "NpuMonitor",
    Message(
        "NpuMonitorRequest",
        (
            Field("targets", TARGETS),
            Field(
                "start",
                BOOL,
                "start monitoring",
                key=_required("NPU_MONITOR_START"),
                flag="--npu-monitor-start",
            ),
            Field(
                "stop",
                BOOL,
                "stop monitoring (flush and tear down)",
                key=_required("NPU_MONITOR_STOP"),
                flag="--npu-monitor-stop",
            ),
            Field(
                "report_interval_s",
                INT,
                "seconds per report (0: unchanged)",
                default=v.DEFAULT_REPORT_INTERVAL_S,
                key=_required("REPORT_INTERVAL_S"),
                minimum=0,
            ),
            Field(
                "duration_s",
                FLOAT,
                "stop by itself after this many seconds (0: never)",
                default=0.0,
                key=_required("DURATION"),
                flag="--duration",
                check=rules.finite(0, "finite, >= 0 s (0: until stopped)"),
            ),
            Field(
                "activity_kinds",
                NAMES,
                "comma-separated: " + ", ".join(ACTIVITY_KINDS),
                default=v.DEFAULT_MONITOR_KINDS,
                key=KeyOf("MSPTI_ACTIVITY_KIND", required=True, empty_is_default=True),
                flag="--mspti-activity-kind",
                check=rules.some_of(ACTIVITY_KINDS),
            ),
            Field(
                "log_file",
                TEXT,
                "write records to files in this directory (absolute)",
                default="",
                key=_required("NPU_MONITOR_LOG_FILE"),
                check=rules.optional_output_path,
            ),
            Field(
                "export_type",
                TEXT,
                "with --log-file: DB (SQLite) or Jsonl",
                default=v.DEFAULT_MONITOR_EXPORT,
                key=KeyOf("NPU_MONITOR_EXPORT_TYPE", required=True, empty_is_default=True),
                check=_export_type,
            ),
            Field(
                "jsonl_rotate_log_lines",
                TEXT,
                "Jsonl lines per file, 100..500000",
                default="",
                key="JSONL_ROTATE_LOG_LINES",
                flag="--json-rotate-log-lines",
                check=rules.int_text(lambda n: 100 <= n <= 500_000, "an integer in 100..500000"),
            ),
            Field(
                "jsonl_rotate_log_files",
                TEXT,
                "Jsonl files kept (-1: all)",
                default="",
                key="JSONL_ROTATE_LOG_FILES",
                flag="--json-rotate-log-files",
                check=rules.int_text(lambda n: n == -1 or n >= 2, "-1 (keep all) or an integer >= 2"),
            ),
            Field(
                "filter",
                TEXT,
                "keep only names containing…: 'Kernel:matmul,conv;API:acl'",
                default="",
                key="NPU_MONITOR_FILTER",
                check=rules.short_text,
            ),
            Field(
                "top_n",
                INT,
                "names reported per kind and device, by total time",
                default=v.DEFAULT_TOP_N,
                key=KeyOf("TOP_N", empty_is_default=True),
                legacy=False,
                check=rules.within(0, v.MAX_TOP_N, f"in 0..{v.MAX_TOP_N} (0: the default {v.DEFAULT_TOP_N})"),
            ),
            Field(
                "auto_trace",
                AUTO_TRACE,
                "with --npu-monitor-start: when a name gets slower than its baseline (or than the other "
                "ranks) by slowdown for `for` intervals, trace `iterations` steps of that process and resume "
                "monitoring; at most one trace per cooldown per process, max per day per job. Defaults: "
                "'slowdown=25%,for=3,iterations=2,cooldown=30m,max=3/day' ('on': all of them); see dyno "
                "incidents",
                parse=auto_trace,
                optional=True,
            ),
        ),
        checks=(_check,),
    ),
    Usage(legacy=(v.MSMONITOR_DAEMON,), dyno="npu-monitor"),
)
