"""npu-monitor's config: msMonitor's ``KEY=VALUE`` keys (reference msmonitor.md §3.2), validated.

Required, as msMonitor's plugin requires them: ``NPU_MONITOR_START``, ``NPU_MONITOR_STOP``,
``REPORT_INTERVAL_S``, ``DURATION``, ``MSPTI_ACTIVITY_KIND``, ``NPU_MONITOR_LOG_FILE``,
``NPU_MONITOR_EXPORT_TYPE``. Optional: ``JSONL_ROTATE_LOG_LINES``, ``JSONL_ROTATE_LOG_FILES``,
``NPU_MONITOR_FILTER``, and this project's ``TOP_N``.

msMonitor ignores an invalid command silently (it only logs). Here :meth:`MonitorConfig.parse` raises
:class:`ConfigError` naming the key, the value and what is valid, so the caller can report it. Rotation
values out of range are clamped (lines) or reset to keep-all (files) with a warning, as msMonitor does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import FrozenSet, List, Mapping, Optional, Tuple

from msmonitor_contract.activity import LABELS, Kind
from msmonitor_contract.kinds.npumonitor import NPUMONITOR
from msmonitor_contract.numbers import strict_int
from msmonitor_contract.vocabulary import (
    DEFAULT_MONITOR_EXPORT,
    DEFAULT_MONITOR_KINDS,
    DEFAULT_REPORT_INTERVAL_S,
    DEFAULT_TOP_N,
    MAX_TOP_N,
    split_list,
)

from .filters import KEEP_ALL, Filter
from .writers import KEEP_ALL_FILES, MAX_LINES, MIN_FILES, MIN_LINES

PATH_MAX = 4096
UINT32_MAX = 2**32 - 1
REQUIRED = tuple(key.name for key in NPUMONITOR.keys if key.required)


class ConfigError(ValueError):
    def __init__(self, key: str, value: str, valid: str) -> None:
        super().__init__(f"{key}={value!r} is invalid ({valid})" if value else f"{key} is missing ({valid})")
        self.key = key


class ExportType(enum.Enum):
    DB = "DB"
    JSONL = "Jsonl"


def _kinds(value: str) -> FrozenSet[Kind]:
    try:
        return frozenset(Kind.parse(token) for token in split_list(value))
    except ValueError:
        raise ConfigError("MSPTI_ACTIVITY_KIND", value, "comma list of " + ", ".join(LABELS)) from None


def _uint32(key: str, value: str) -> int:
    number = strict_int(value)
    if number is None or number > UINT32_MAX:
        raise ConfigError(key, value, "an unsigned 32-bit integer")
    return number


def _float(key: str, value: str) -> float:
    try:
        if value.strip("0123456789.-"):
            raise ValueError
        return float(value)
    except ValueError:
        raise ConfigError(key, value, "a number of seconds") from None


def _bool(key: str, value: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise ConfigError(key, value, "true or false")
    return lowered == "true"


def _export_type(value: str) -> ExportType:
    for export in ExportType:
        if value.lower() == export.value.lower():
            return export
    raise ConfigError("NPU_MONITOR_EXPORT_TYPE", value, "DB or Jsonl")


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigError(key, value, "an integer") from None


DEFAULT_KINDS = frozenset(Kind.parse(label) for label in split_list(DEFAULT_MONITOR_KINDS))
DEFAULT_EXPORT = ExportType(DEFAULT_MONITOR_EXPORT)


@dataclass(frozen=True)
class MonitorConfig:
    """One npu-monitor command. ``report_interval_s == 0`` means "leave the interval unchanged"."""

    start: bool = False
    stop: bool = False
    report_interval_s: int = DEFAULT_REPORT_INTERVAL_S
    duration_s: float = 0.0
    kinds: FrozenSet[Kind] = DEFAULT_KINDS
    log_dir: str = ""
    export_type: ExportType = DEFAULT_EXPORT
    rotate_lines: Optional[int] = None  # None: MSMONITOR_JSONL_ROTATE_LOG_LINES or the default
    rotate_files: Optional[int] = None
    filter: Filter = KEEP_ALL
    top_n: int = DEFAULT_TOP_N
    warnings: Tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, source: Mapping[str, str]) -> MonitorConfig:
        """From the keys of an npu-monitor command; raises ConfigError."""
        values = {k.strip(): v.strip() for k, v in source.items()}
        for key in REQUIRED:
            if key not in values:
                raise ConfigError(key, "", "required by npu-monitor")
        log_dir = values["NPU_MONITOR_LOG_FILE"]
        if len(log_dir) > PATH_MAX:
            raise ConfigError("NPU_MONITOR_LOG_FILE", log_dir[:40] + "…", f"at most {PATH_MAX} characters")
        warnings: List[str] = []
        return cls(
            start=_bool("NPU_MONITOR_START", values["NPU_MONITOR_START"]),
            stop=_bool("NPU_MONITOR_STOP", values["NPU_MONITOR_STOP"]),
            report_interval_s=_uint32("REPORT_INTERVAL_S", values["REPORT_INTERVAL_S"]),
            duration_s=_float("DURATION", values["DURATION"]),
            kinds=_kinds(values["MSPTI_ACTIVITY_KIND"]),
            log_dir=log_dir,
            export_type=_export_type(values["NPU_MONITOR_EXPORT_TYPE"]),
            rotate_lines=_rotate_lines(values.get("JSONL_ROTATE_LOG_LINES", ""), warnings),
            rotate_files=_rotate_files(values.get("JSONL_ROTATE_LOG_FILES", ""), warnings),
            filter=Filter.parse(values.get("NPU_MONITOR_FILTER", "")),
            top_n=_top_n(values.get("TOP_N", "")),
            warnings=tuple(warnings),
        )


def _rotate_lines(value: str, warnings: List[str]) -> Optional[int]:
    if not value:
        return None
    lines = _int("JSONL_ROTATE_LOG_LINES", value)
    clamped = min(max(lines, MIN_LINES), MAX_LINES)
    if clamped != lines:
        warnings.append(
            f"JSONL_ROTATE_LOG_LINES={lines} is outside [{MIN_LINES}, {MAX_LINES}]: using {clamped}"
        )
    return clamped


def _rotate_files(value: str, warnings: List[str]) -> Optional[int]:
    if not value:
        return None
    files = _int("JSONL_ROTATE_LOG_FILES", value)
    if files != KEEP_ALL_FILES and files < MIN_FILES:
        warnings.append(f"JSONL_ROTATE_LOG_FILES={files} must be -1 or ≥ {MIN_FILES}: keeping all files")
        return KEEP_ALL_FILES
    return files


def _top_n(value: str) -> int:
    if not value:
        return DEFAULT_TOP_N
    n = _int("TOP_N", value)
    if not 1 <= n <= MAX_TOP_N:
        raise ConfigError("TOP_N", value, f"1 to {MAX_TOP_N}")
    return n
