"""What a process reports each interval: typed, JSON round-trippable, chunkable under a byte budget.

A :class:`Report` holds, per (kind, device), the count, total, min and max duration of the interval's
records and the top N names by total time (markers: by domain and name), plus what was dropped and
which requested kinds the backend cannot provide. :meth:`Report.to_chunks` splits it into JSON
documents that each fit a datagram; :class:`ChunkAssembler`, on the receiving side, puts it back
together. :meth:`Report.data_messages` gives msMonitor's compatibility
``data`` messages.

This module is imported by the daemon too: standard library only, no backend imports.
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .activity import HOST, OTHER, Kind

VERSION = 1
DEFAULT_CHUNK_BYTES = 48 * 1024
MIN_CHUNK_BYTES = 4096  # room for the header and the longest name (records.MAX_NAME_CHARS)
DEFAULT_MARKER_DOMAIN = "default"


MAX_DEVICE = 255  # accelerators per node; anything above is not a device id
MAX_PARTS = 256  # chunks of one report: tens of KiB usually, ~70 chunks with 1000 names of 11 kinds


class ReportError(ValueError):
    """A report document or chunk that does not parse."""


# The ranges of the gRPC fields values end up in: a report outside them could be stored but never served.
UINT64 = (0, 2**64 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32 = (0, 2**32 - 1)


def _int(value: Any, bounds: Tuple[int, int] = UINT64) -> int:
    number = int(value)
    if not bounds[0] <= number <= bounds[1]:
        raise ReportError(f"{number} is outside {bounds[0]}..{bounds[1]}")
    return number


def _domain(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def sampled_fraction(start_ns: int, end_ns: int, sampled_ns: int) -> float:
    """The part of the interval ``[start_ns, end_ns)`` a report observed: 1.0 for all of it (MSPTI), and
    for a report that does not say (``sampled_ns`` 0, as msMonitor's); less for the torch backend's
    sampling window, whose counts and totals are that window's only."""
    interval = end_ns - start_ns
    return sampled_ns / interval if 0 < sampled_ns < interval else 1.0


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@dataclass
class NameStat:
    """One name's share of a (kind, device) group. ``domain`` is set for markers only."""

    name: str
    count: int
    total_ns: int
    domain: Optional[str] = None

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "count": self.count, "total_ns": self.total_ns}
        out["mean_ns"] = round(self.mean_ns, 1)
        if self.domain is not None:
            out["domain"] = self.domain
        return out

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> NameStat:
        return cls(str(d["name"]), _int(d["count"]), _int(d["total_ns"]), _domain(d.get("domain")))


@dataclass
class KindStat:
    """Durations of one kind on one device (``-1``: host) over the interval.

    ``top`` holds the N names with the largest total; ``other`` sums every other name (and names past
    the bounded table), so that ``sum(top) + other == count/total``. ``distinct`` is the number of
    distinct names seen (names past the bounded table count once, as ``<other>``).
    """

    kind: Kind
    device: int
    count: int
    total_ns: int
    min_ns: int
    max_ns: int
    top: List[NameStat] = field(default_factory=list)
    other: NameStat = field(default_factory=lambda: NameStat(OTHER, 0, 0))
    distinct: int = 0

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0

    def stats_dict(self) -> Dict[str, Any]:
        return {
            "kind": self.kind.label,
            "device": self.device,
            "count": self.count,
            "total_ns": self.total_ns,
            "min_ns": self.min_ns,
            "max_ns": self.max_ns,
            "mean_ns": round(self.mean_ns, 1),
            "distinct": self.distinct,
            "other": {"count": self.other.count, "total_ns": self.other.total_ns},
        }

    def to_dict(self) -> Dict[str, Any]:
        out = self.stats_dict()
        out["top"] = [n.to_dict() for n in self.top]
        return out

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> KindStat:
        other = d.get("other") or {}
        device = int(d["device"])
        if not HOST <= device <= MAX_DEVICE:  # a peer must not make a sink open a run per number
            raise ReportError(f"device {device} is outside {HOST}..{MAX_DEVICE}")
        return cls(
            kind=Kind.parse(d["kind"]),
            device=device,
            count=_int(d["count"]),
            total_ns=_int(d["total_ns"]),
            min_ns=_int(d["min_ns"]),
            max_ns=_int(d["max_ns"]),
            top=[NameStat.from_dict(n) for n in d.get("top", [])],
            other=NameStat(OTHER, _int(other.get("count", 0)), _int(other.get("total_ns", 0))),
            distinct=_int(d.get("distinct", 0), UINT32),
        )


@dataclass
class Report:
    """One interval of one process.

    ``sampled_ns`` is how much of ``[start_ns, end_ns)`` the backend actually observed: all of it for
    MSPTI, the profiling window for the sampling torch backend. ``dropped`` counts what was lost and
    why (e.g. ``buffer_requests_declined``, ``filtered``); ``unavailable`` maps requested kinds the
    backend cannot provide to the reason.
    """

    seq: int
    pid: int
    backend: str
    start_ns: int
    end_ns: int
    sampled_ns: int
    kinds: List[KindStat] = field(default_factory=list)
    dropped: Dict[str, int] = field(default_factory=dict)
    unavailable: Dict[str, str] = field(default_factory=dict)
    counters: Dict[str, int] = field(default_factory=dict)  # not losses: e.g. records without a name
    final: bool = False  # the last report of a monitoring session

    def header(self) -> Dict[str, Any]:
        return {
            "v": VERSION,
            "seq": self.seq,
            "pid": self.pid,
            "backend": self.backend,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "sampled_ns": self.sampled_ns,
            "dropped": self.dropped,
            "unavailable": self.unavailable,
            "counters": self.counters,
            "final": self.final,
        }

    def to_dict(self) -> Dict[str, Any]:
        out = self.header()
        out["kinds"] = [k.to_dict() for k in self.kinds]
        return out

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Report:
        try:
            if d.get("v") != VERSION:
                raise ReportError(f"unsupported report version {d.get('v')!r}")
            return cls(
                seq=_int(d["seq"]),
                pid=int(d["pid"]),
                backend=str(d["backend"]),
                start_ns=_int(d["start_ns"], INT64),
                end_ns=_int(d["end_ns"], INT64),
                sampled_ns=_int(d["sampled_ns"], INT64),
                kinds=[KindStat.from_dict(k) for k in d.get("kinds", [])],
                dropped={str(k): _int(v) for k, v in d.get("dropped", {}).items()},
                unavailable={str(k): str(v) for k, v in d.get("unavailable", {}).items()},
                counters={str(k): int(v) for k, v in d.get("counters", {}).items()},
                final=bool(d.get("final", False)),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:  # int(Infinity)
            if isinstance(exc, ReportError):
                raise
            raise ReportError(f"malformed report: {exc}") from exc

    @property
    def sampled_fraction(self) -> float:
        return sampled_fraction(self.start_ns, self.end_ns, self.sampled_ns)

    def find(self, kind: Kind, device: Optional[int] = None) -> List[KindStat]:
        return [k for k in self.kinds if k.kind == kind and (device is None or k.device == device)]

    def to_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> List[bytes]:
        """UTF-8 JSON documents of at most *max_bytes* each; :class:`ChunkAssembler` merges them back."""
        return _Chunker(self, max_bytes).chunks()

    @classmethod
    def _from_docs(cls, docs: List[Dict[str, Any]]) -> Report:
        if not docs:
            raise ReportError("no chunks")
        docs.sort(key=lambda d: d["part"])
        first = docs[0]
        parts = first["parts"]
        if [d["part"] for d in docs] != list(range(parts)):
            raise ReportError(f"chunks {[d['part'] for d in docs]} do not make up {parts} parts")
        merged = dict(first)
        try:
            if any((d["seq"], d["pid"], d["parts"]) != (first["seq"], first["pid"], parts) for d in docs):
                raise ReportError("chunks of different reports")
            merged["kinds"] = _merge_items(item for d in docs for item in d.get("kinds", []))
        except (KeyError, TypeError, AttributeError) as exc:  # a field missing, or kinds that are not objects
            raise ReportError(f"malformed chunk: {exc!r}") from None
        return cls.from_dict(merged)

    def data_messages(self) -> List[Dict[str, Any]]:
        """msMonitor's ``data`` messages (reference msmonitor.md §3.4), one per kind and device.

        ``duration`` is the interval's summed duration in ns and ``timestamp`` the end of the interval.
        Markers are not one message per range as in msMonitor (unbounded): one per reported
        (domain, name, device), with the summed duration of its ranges.
        """
        out: List[Dict[str, Any]] = []
        for ks in self.kinds:
            if ks.kind != Kind.MARKER:
                out.append(_data(ks.kind, ks.device, ks.total_ns, self.end_ns))
                continue
            for ns in ks.top:
                msg = _data(ks.kind, ks.device, ns.total_ns, self.end_ns)
                msg["domain"] = ns.domain or DEFAULT_MARKER_DOMAIN
                msg["name"] = ns.name
                out.append(msg)
        return out


def _data(kind: Kind, device: int, duration: int, timestamp: int) -> Dict[str, Any]:
    return {"kind": kind.label, "deviceId": device, "duration": duration, "timestamp": timestamp}


class _Chunker:
    """Greedy packing of kind items into chunks; a kind whose top list alone is too big is split."""

    PLACEHOLDER = 10**9  # sizes are measured with the widest part numbers the chunk can carry

    def __init__(self, report: Report, max_bytes: int) -> None:
        if max_bytes < MIN_CHUNK_BYTES:
            raise ValueError(f"chunk budget {max_bytes} is below {MIN_CHUNK_BYTES} bytes")
        self.header = report.header()
        self.report = report
        probe = dict(self.header, part=self.PLACEHOLDER, parts=self.PLACEHOLDER, kinds=[])
        self.room = max_bytes - len(_dumps(probe).encode())
        if self.room < MIN_CHUNK_BYTES // 2:
            raise ValueError("the report header alone does not fit the chunk budget")

    def chunks(self) -> List[bytes]:
        groups: List[List[str]] = [[]]
        used = 0
        for item in self._items():
            size = len(item.encode()) + 1  # the comma
            if groups[-1] and used + size > self.room:
                groups.append([])
                used = 0
            groups[-1].append(item)
            used += size
        head = dict(self.header, parts=len(groups))
        return [self._encode(head, i, items) for i, items in enumerate(groups)]

    @staticmethod
    def _encode(head: Dict[str, Any], part: int, items: List[str]) -> bytes:
        prefix = _dumps(dict(head, part=part, kinds=[]))[:-3]  # cut the closing '[]}'
        return (prefix + "[" + ",".join(items) + "]}").encode()

    def _items(self) -> Iterable[str]:
        for ks in self.report.kinds:
            whole = _dumps(ks.to_dict())
            if len(whole.encode()) <= self.room:
                yield whole
            else:
                yield from self._split(ks)

    def _split(self, ks: KindStat) -> Iterable[str]:
        """The stats with as many top entries as fit, then continuation items with the rest."""
        item: Dict[str, Any] = dict(ks.stats_dict(), top=[])
        size = len(_dumps(item).encode())
        for name in ks.top:
            entry = name.to_dict()
            entry_size = len(_dumps(entry).encode()) + 1
            if item["top"] and size + entry_size > self.room:
                yield _dumps(item)
                item = {"kind": ks.kind.label, "device": ks.device, "cont": True, "top": []}
                size = len(_dumps(item).encode())
            item["top"].append(entry)
            size += entry_size
        yield _dumps(item)


def _load_chunk(chunk: bytes) -> Dict[str, Any]:
    try:
        doc = json.loads(chunk)
    except (ValueError, RecursionError) as exc:  # deep nesting exhausts the decoder's recursion
        raise ReportError(f"chunk is not JSON: {exc}") from exc
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("part"), int)
        or not isinstance(doc.get("parts"), int)
    ):
        raise ReportError("chunk lacks part numbers")
    if not 0 <= doc["part"] < doc["parts"]:
        raise ReportError(f"chunk part {doc['part']} of {doc['parts']}")
    return doc


def _merge_items(items: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
    merged: List[Dict[str, Any]] = []
    for item in items:
        if item.get("cont"):
            if not merged or (merged[-1]["kind"], merged[-1]["device"]) != (item["kind"], item["device"]):
                raise ReportError("continuation chunk without the kind it continues")
            merged[-1]["top"].extend(item["top"])
        else:
            merged.append(item)
    return merged


class ChunkAssembler:
    """Receiving side: feed chunks in any order, get each report once all of its parts arrived.

    Bounded: at most *max_pending* incomplete reports are kept; the oldest is discarded (and counted in
    :attr:`incomplete`) when more arrive, as happens when a datagram is lost.
    """

    def __init__(self, max_pending: int = 64) -> None:
        self.max_pending = max_pending
        self.incomplete = 0
        self._pending: Dict[Tuple[int, int], Dict[int, Dict[str, Any]]] = collections.OrderedDict()

    def add(self, chunk: bytes) -> Optional[Report]:
        """The completed report, or None while parts are missing. Raises ReportError on a bad chunk."""
        doc = _load_chunk(chunk)
        if not 1 <= doc["parts"] <= MAX_PARTS or not 0 <= doc["part"] < doc["parts"]:
            raise ReportError(f"chunk {doc['part']} of {doc['parts']} is outside 1..{MAX_PARTS} parts")
        if doc["parts"] == 1:  # the usual case: parsed once
            return Report._from_docs([doc])
        try:
            key = (int(doc["pid"]), int(doc["seq"]))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ReportError(f"chunk without a report's pid and seq: {exc!r}") from None
        parts = self._pending.setdefault(key, {})
        parts[doc["part"]] = doc
        if len(parts) == doc["parts"]:
            del self._pending[key]
            return Report._from_docs(list(parts.values()))
        while len(self._pending) > self.max_pending:
            self._pending.pop(next(iter(self._pending)))
            self.incomplete += 1
        return None
