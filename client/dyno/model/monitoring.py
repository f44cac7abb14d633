"""npu-monitor's reports as ``--watch`` shows them, and the incidents ``--auto-trace`` raised."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class NameStats:
    name: str = ""
    domain: str = ""
    count: int = 0
    total_ns: int = 0
    mean_ns: float = 0.0


@dataclass(frozen=True)
class KindStats:
    kind: str = ""
    device: int = 0
    count: int = 0
    total_ns: int = 0
    min_ns: int = 0
    max_ns: int = 0
    mean_ns: float = 0.0
    distinct: int = 0
    top: Tuple[NameStats, ...] = ()
    other: Optional[NameStats] = None


@dataclass(frozen=True)
class MetricsReport:
    hostname: str = ""
    pid: int = 0
    host_pid: int = 0
    rank: int = 0
    job_id: int = 0
    seq: int = 0
    backend: str = ""
    start_ns: int = 0
    end_ns: int = 0
    sampled_ns: int = 0
    kinds: Tuple[KindStats, ...] = ()
    dropped: Dict[str, int] = field(default_factory=dict)
    unavailable: Dict[str, str] = field(default_factory=dict)
    final: bool = False


@dataclass(frozen=True)
class NameFigure:
    name: str = ""
    baseline_ns: float = 0.0
    current_ns: float = 0.0


@dataclass(frozen=True)
class IncidentEvent:
    at: float = 0.0
    what: str = ""


@dataclass(frozen=True)
class IncidentInfo:
    id: int = 0
    at: float = 0.0
    hostname: str = ""
    job_id: int = 0
    rank: int = 0
    pid: int = 0
    host_pid: int = 0
    kind: str = ""
    device: int = 0
    name: str = ""
    detection: str = ""
    baseline_ns: float = 0.0
    current_ns: float = 0.0
    intervals: int = 0
    report_seq: int = 0
    traced: bool = False
    action: str = ""
    trace_id: str = ""
    trace_files: Tuple[str, ...] = ()
    figures: Tuple[NameFigure, ...] = ()
    timeline: Tuple[IncidentEvent, ...] = ()
