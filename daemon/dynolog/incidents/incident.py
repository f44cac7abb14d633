"""An incident: what was detected, where, the evidence, and what was done about it."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from .detector import Detection, Figure

# What was done, in words; the trace's own outcome follows these while it runs.
TRACING = "tracing"
RATE_LIMITED = "not traced: rate limit"


@dataclass
class Incident:
    id: int
    at: float
    hostname: str
    job_id: int
    rank: int
    pid: int
    host_pid: int
    kind: str
    device: int
    name: str
    detection: str
    baseline_ns: float
    current_ns: float
    intervals: int
    report_seq: int
    traced: bool = False
    action: str = ""
    trace_id: str = ""
    trace_files: List[str] = field(default_factory=list)
    figures: List[Figure] = field(default_factory=list)
    timeline: List[Tuple[float, str]] = field(default_factory=list)
    # The npu-monitor start to resume with (NpuMonitorCommand as JSON), kept from the stop until the
    # resume: a daemon restarted in between resumes the process from the store.
    resume: str = ""

    @classmethod
    def of(cls, detection: Detection) -> Incident:
        who, worst = detection.who, detection.primary
        incident = cls(
            id=0,
            at=time.time(),
            hostname=who.hostname,
            job_id=who.job_id,
            rank=who.rank,
            pid=who.pid,
            host_pid=who.host_pid,
            kind=worst.key.kind,
            device=worst.key.device,
            name=worst.key.name,
            detection=worst.detection,
            baseline_ns=worst.baseline_ns,
            current_ns=worst.current_ns,
            intervals=worst.intervals,
            report_seq=detection.report_seq,
            figures=list(detection.figures),
        )
        incident.note(
            f"{worst.detection}: {worst.key} {worst.ratio:.2f}x "
            f"({worst.current_ns / 1e3:.1f} us per call against {worst.baseline_ns / 1e3:.1f} us) "
            f"for {worst.intervals} intervals"
            + (f", while its kind's names ran {worst.pace:.2f}x as a whole" if worst.pace > 1.05 else "")
        )
        others = [f"{f.detection} {f.key} {f.ratio:.2f}x" for f in detection.findings[1:]]
        if others:
            incident.note("also slower: " + "; ".join(others))
        return incident

    def note(self, what: str) -> None:
        self.timeline.append((time.time(), what))

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Incident:
        incident = cls(**d)
        incident.figures = [Figure(**f) for f in d["figures"]]
        incident.timeline = [(at, what) for at, what in d["timeline"]]
        return incident
