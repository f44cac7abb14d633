"""What the rows say about each request: its first and last time, rows, processes and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Set

from .model import Process, Recording, after, ms, single


@dataclass
class Request:
    """What the rows that carry one request id (not a batch's list) say about that request."""

    rid: str
    first_ns: int
    last_ns: int
    events: int = 0
    spans: int = 0
    seen_in: Set[Process] = field(default_factory=set)
    metrics: Dict[str, float] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return ms(self.last_ns - self.first_ns)

    @property
    def processes(self) -> int:
        return len(self.seen_in)

    def saw(self, process: Process, start_ns: int, end_ns: int) -> None:
        self.first_ns = min(self.first_ns, start_ns)
        self.last_ns = max(self.last_ns, end_ns)
        self.seen_in.add(process)


def requests(recording: Recording) -> List[Request]:
    """One per request id (spans, events and metrics that carry it alone), the first seen first. A
    metric's value for a request is the end of its series: the last ``set`` plus the ``inc`` after it."""
    found: Dict[str, Request] = {}

    def request(rid: str, process: Process, start_ns: int, end_ns: int) -> Request:
        req = found.setdefault(rid, Request(rid, start_ns, end_ns))
        req.saw(process, start_ns, end_ns)
        return req

    for span in recording.spans:
        if single(span.rid):
            request(span.rid, span.process, span.start_ns, span.end_ns).spans += 1
    for event in recording.events:
        if single(event.rid):
            request(event.rid, event.process, event.ts_ns, event.ts_ns).events += 1
    for metric in sorted(recording.metrics, key=lambda m: m.ts_ns):
        if single(metric.rid):
            values = request(metric.rid, metric.process, metric.ts_ns, metric.ts_ns).metrics
            values[metric.name] = after(values.get(metric.name, 0.0), metric)
    return sorted(found.values(), key=lambda r: (r.first_ns, r.rid))
