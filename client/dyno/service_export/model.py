"""A recording as rows: one dataclass per table of the plugin's schema
(:mod:`msmonitor_plugin.service_profiler.schema`), each row with the process that recorded it, its fields
named and ordered as the table's columns; and what the stored values mean (request ids, attributes,
metric series)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Union

Rid = Union[str, List[str]]


def ms(ns: int) -> float:
    return ns / 1e6


@dataclass(frozen=True, order=True)
class Process:
    host: str
    pid: int

    @property
    def label(self) -> str:
        return f"{self.host}-{self.pid}"


@dataclass(frozen=True, slots=True)
class Meta:
    process: Process
    key: str
    value: str
    ts_ns: int


@dataclass(frozen=True, slots=True)
class Span:
    process: Process
    name: str
    domain: str
    start_ns: int
    end_ns: int
    tid: int
    rid: str  # as stored: an id, a JSON array of ids (a batch), or ''
    attrs: str  # a JSON object

    @property
    def duration_ms(self) -> float:
        return ms(self.end_ns - self.start_ns)


@dataclass(frozen=True, slots=True)
class Event:
    process: Process
    name: str
    domain: str
    ts_ns: int
    tid: int
    rid: str
    attrs: str


@dataclass(frozen=True, slots=True)
class Metric:
    process: Process
    name: str
    domain: str
    ts_ns: int
    tid: int
    rid: str
    value: float
    kind: str  # set | inc
    scope: str  # as given, 'req' for a request's, or ''


@dataclass(frozen=True, slots=True)
class Link:
    process: Process
    from_rid: str
    to_rid: str
    domain: str
    ts_ns: int


@dataclass(frozen=True, slots=True)
class Api:
    process: Process
    name: str
    start_ns: int
    end_ns: int
    tid: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class Kernel:
    process: Process
    name: str
    type: str
    start_ns: int
    end_ns: int
    device: int
    stream: int
    correlation_id: int


# Per table of the schema, the type of its rows (Recording has a list of them under the table's name).
ROW_TYPES: Dict[str, Callable[..., Any]] = {
    "meta": Meta,
    "spans": Span,
    "events": Event,
    "metrics": Metric,
    "links": Link,
    "api": Api,
    "kernel": Kernel,
}


@dataclass
class Recording:
    """Rows read from one database, or from all of them merged."""

    meta: List[Meta] = field(default_factory=list)
    spans: List[Span] = field(default_factory=list)
    events: List[Event] = field(default_factory=list)
    metrics: List[Metric] = field(default_factory=list)
    links: List[Link] = field(default_factory=list)
    api: List[Api] = field(default_factory=list)
    kernel: List[Kernel] = field(default_factory=list)
    has_operators: bool = False  # an operator database was read (profiler.db then has api and kernel)

    def extend(self, other: Recording) -> None:
        self.meta += other.meta
        self.spans += other.spans
        self.events += other.events
        self.metrics += other.metrics
        self.links += other.links
        self.api += other.api
        self.kernel += other.kernel
        self.has_operators = self.has_operators or other.has_operators

    def processes(self) -> List[Process]:
        tables = (self.meta, self.spans, self.events, self.metrics, self.links, self.api, self.kernel)
        return sorted({row.process for rows in tables for row in rows})


# --- what the stored values mean ------------------------------------------------------------------------


def parse_rid(text: str) -> Rid:
    """An id, or the list of ids of a batch (stored as a JSON array)."""
    if text.startswith("["):
        with contextlib.suppress(ValueError):
            ids = json.loads(text)
            if isinstance(ids, list):
                return [str(i) for i in ids]
    return text


def parse_attrs(text: str) -> Any:
    """The attributes as an object; text that is not JSON stays text, and NaN or Infinity (which
    Python writes but JSON has not) stays a word."""
    if not text:
        return {}
    try:
        return json.loads(text, parse_constant=str)
    except ValueError:
        return text


def single(rid: str) -> bool:
    """The row carries one request's id (not a batch's list, not none)."""
    return bool(rid) and isinstance(parse_rid(rid), str)


def after(current: float, metric: Metric) -> float:
    """A metric's series after *metric*: ``set`` replaces the value, ``inc`` adds to it."""
    return current + metric.value if metric.kind == "inc" else metric.value
