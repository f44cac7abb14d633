"""A recording as typed rows, whichever writer made it: each mark (an event, a span or a link) with its
process and its message's attributes, counters, meta, and operator timing; and what the attributes mean
(request ids, a batch's requests, metrics), as MindIE's analyser reads them."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

EVENT, SPAN, LINK = "event", "span", "link"
Member = Tuple[str, Optional[int]]  # a request id, and its iteration in the batch (None: not given)


@dataclass(frozen=True, order=True)
class Process:
    host: str
    pid: int

    @property
    def label(self) -> str:
        return f"{self.host}-{self.pid}"


@dataclass(frozen=True)
class Mark:
    """One row of MindIE's ``slice`` (26.0) or ``Mstx`` (8.3), or of this project's older tables."""

    process: Process
    prof_id: str  # the database's name without .db, as the analyser names a recording's rows
    name: str
    domain: str
    start_ns: int
    end_ns: int
    tid: int
    kind: str  # EVENT | SPAN | LINK
    attrs: Dict[str, Any]  # the message: rid, "name=" / "name+" metrics, "scope#Name", attributes
    members: Tuple[Member, ...] = ()  # a batch's requests (its rid a list), each with its iteration

    @property
    def rid(self) -> Any:
        return self.attrs.get("rid", "")

    @property
    def request_ids(self) -> Tuple[str, ...]:
        """The requests the mark is about: a batch's members, or its one id."""
        if self.members:
            return tuple(rid for rid, _ in self.members)
        return () if isinstance(self.rid, (list, dict)) or self.rid in ("", None) else (str(self.rid),)

    def metric(self, name: str) -> Optional[float]:
        """The value set (``name=``) or added (``name+``) by this mark, if it carries one."""
        for key in (f"{name}=", f"{name}+", name):
            value = self.attrs.get(key)
            if value is not None:
                with contextlib.suppress(TypeError, ValueError):
                    return float(value)
        return None


@dataclass(frozen=True)
class Counter:
    process: Process
    name: str
    domain: str
    ts_ns: int
    values: Dict[str, Any]


@dataclass(frozen=True)
class Api:
    process: Process
    name: str
    start_ns: int
    end_ns: int
    tid: int
    correlation_id: int


@dataclass(frozen=True)
class Kernel:
    process: Process
    name: str
    type: str
    start_ns: int
    end_ns: int
    device: int
    stream: int
    correlation_id: int


@dataclass
class Recording:
    """Rows read from one database, or from all of them merged; ``layouts`` says which writer's each was."""

    marks: List[Mark] = field(default_factory=list)
    counters: List[Counter] = field(default_factory=list)
    meta: Dict[Process, Dict[str, str]] = field(default_factory=dict)
    api: List[Api] = field(default_factory=list)
    kernel: List[Kernel] = field(default_factory=list)
    layouts: Dict[str, int] = field(default_factory=dict)  # layout -> databases read in it

    def extend(self, other: Recording) -> None:
        self.marks += other.marks
        self.counters += other.counters
        for process, values in other.meta.items():
            self.meta.setdefault(process, {}).update(values)
        self.api += other.api
        self.kernel += other.kernel
        for layout, n in other.layouts.items():
            self.layouts[layout] = self.layouts.get(layout, 0) + n

    def processes(self) -> List[Process]:
        rows: Tuple[Any, ...] = (*self.marks, *self.counters, *self.api, *self.kernel)
        return sorted({row.process for row in rows} | set(self.meta))


# --- what the attributes mean -------------------------------------------------------------------------


def parse_message(text: str) -> Dict[str, Any]:
    """A message as an object: JSON, or 8.3's older form (``^`` for quotes, no braces, a trailing comma);
    NaN or Infinity stays a word; anything else is no attributes."""
    text = (text or "").strip()
    if not text:
        return {}
    if not text.startswith("{"):
        text = "{" + text.replace("^", '"').rstrip(",") + "}"
    try:
        value = json.loads(text, parse_constant=str)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Iterations:
    """Each batch member's iteration, as the analyser reads a ``res`` list (processor_res.py): ``iter``
    as given; vLLM's ``iter_size`` counts tokens, so a request's first batch is iteration 0 and each later
    one adds its ``iter_size`` (kept per request across the marks of a recording, in order)."""

    def __init__(self) -> None:
        self._seen: Dict[str, int] = {}

    def members(self, rid: Any) -> Tuple[Member, ...]:
        if not isinstance(rid, list):
            return ()
        return tuple(self._member(item) for item in rid)

    def _member(self, item: Any) -> Member:
        if not isinstance(item, dict):
            return str(item), None
        rid = str(item.get("rid", ""))
        size = item.get("iter_size")
        if size and isinstance(size, int):
            iteration = self._seen[rid] = self._seen[rid] + size if rid in self._seen else 0
            return rid, iteration
        given = item.get("iter")
        return rid, given if isinstance(given, int) and not isinstance(given, bool) else None


def single_rid(rid: Any) -> str:
    """The id of a mark of one request ('' for a batch, none, or an id the analyser refuses: with a comma,
    brace or colon)."""
    if isinstance(rid, (list, dict)) or rid in ("", None):
        return ""
    text = str(rid)
    return "" if any(c in text for c in ",{:") else text
