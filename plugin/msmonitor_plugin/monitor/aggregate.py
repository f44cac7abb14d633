"""Per-interval aggregation with bounded memory, whatever the record rate.

Per (kind, device): count, total, min and max duration, and per name count and total. The name table of
a group holds at most ``max_names`` entries; later names go to one ``<other>`` bucket, so a job that
invents a new kernel name per step cannot grow the plugin. Groups are bounded too (``max_groups``).

Two ways in: :meth:`Aggregator.add` for one :class:`~.records.Record` (the torch backend), and
:meth:`Aggregator.merge` for pre-aggregated partial sums (the MSPTI hot path aggregates each buffer by
name pointer first and merges a few hundred rows per buffer here, under one lock acquisition).
Markers are keyed by ``(domain, name)``, other kinds by name.
"""

from __future__ import annotations

import collections
import threading
from typing import Counter, Dict, Iterable, List, Optional, Tuple, Union

from msmonitor_contract.activity import OTHER, Kind
from msmonitor_contract.report import DEFAULT_MARKER_DOMAIN, KindStat, NameStat, Report

from .records import Record

DEFAULT_TOP_N = 10
DEFAULT_MAX_NAMES = 4096
DEFAULT_MAX_GROUPS = 256

NameKey = Union[str, Tuple[str, str]]  # name, or (domain, name) for markers
# One partial row: kind, device, name key, count, total, min, max (durations in ns).
Row = Tuple[Kind, int, NameKey, int, int, int, int]


class _Group:
    __slots__ = ("count", "max", "min", "names", "other_count", "other_total", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.min = -1
        self.max = 0
        self.names: Dict[NameKey, List[int]] = {}
        self.other_count = 0
        self.other_total = 0

    def add(self, row: Row, max_names: int) -> None:
        """Add *row*'s sums (of this group's kind and device)."""
        _kind, _device, key, count, total, mn, mx = row
        self.count += count
        self.total += total
        if self.min < 0 or mn < self.min:
            self.min = mn
        if mx > self.max:
            self.max = mx
        entry = self.names.get(key)
        if entry is not None:
            entry[0] += count
            entry[1] += total
        elif len(self.names) < max_names:
            self.names[key] = [count, total]
        else:
            self.other_count += count
            self.other_total += total

    def stat(self, kind: Kind, device: int, top_n: int) -> KindStat:
        ranked = sorted(self.names.items(), key=lambda kv: kv[1][1], reverse=True)
        top = [_name_stat(kind, key, c, t) for key, (c, t) in ranked[:top_n]]
        rest = ranked[top_n:]
        other = NameStat(
            OTHER,
            self.other_count + sum(c for _, (c, _t) in rest),
            self.other_total + sum(t for _, (_c, t) in rest),
        )
        distinct = len(self.names) + (1 if self.other_count else 0)
        return KindStat(
            kind, device, self.count, self.total, max(self.min, 0), self.max, top, other, distinct
        )


def _name_stat(kind: Kind, key: NameKey, count: int, total: int) -> NameStat:
    if kind == Kind.MARKER and isinstance(key, tuple):
        return NameStat(key[1], count, total, key[0])
    return NameStat(str(key), count, total)


class Aggregator:
    """Thread-safe accumulator of one interval; :meth:`take` returns the report and starts the next."""

    def __init__(
        self,
        top_n: int = DEFAULT_TOP_N,
        max_names: int = DEFAULT_MAX_NAMES,
        max_groups: int = DEFAULT_MAX_GROUPS,
    ) -> None:
        self.top_n = top_n
        self.max_names = max_names
        self.max_groups = max_groups
        self._lock = threading.Lock()
        self._groups: Dict[Tuple[Kind, int], _Group] = {}
        self._dropped: Counter[str] = collections.Counter()
        self._counters: Counter[str] = collections.Counter()

    def add(self, record: Record) -> None:
        self.add_many((record,))

    def add_many(self, records: Iterable[Record]) -> None:
        with self._lock:
            for record in records:
                d = max(0, record.end_ns - record.start_ns)
                key: NameKey = record.name
                if record.kind == Kind.MARKER:
                    key = (record.domain or DEFAULT_MARKER_DOMAIN, record.name)
                self._add((record.kind, record.device, key, 1, d, d, d))

    def merge(self, rows: Iterable[Row]) -> None:
        """Add partial sums, e.g. one buffer's records grouped by name."""
        with self._lock:
            for row in rows:
                self._add(row)

    def drop(self, reason: str, count: int = 1) -> None:
        """Count records (or buffer requests) lost, by reason; reported in ``Report.dropped``."""
        if count:
            with self._lock:
                self._dropped[reason] += count

    def count(self, counter: str, n: int = 1) -> None:
        """Count something worth reporting that is not a loss (``Report.counters``)."""
        if n:
            with self._lock:
                self._counters[counter] += n

    def _add(self, row: Row) -> None:
        where = row[:2]  # kind, device
        group = self._groups.get(where)
        if group is None:
            if len(self._groups) >= self.max_groups:
                self._dropped["groups_overflow"] += row[3]  # its count
                return
            group = self._groups[where] = _Group()
        group.add(row, self.max_names)

    def take(  # noqa: PLR0913 - keyword-only, one per field of the contract's Report header
        self,
        *,
        seq: int,
        pid: int,
        backend: str,
        start_ns: int,
        end_ns: int,
        sampled_ns: Optional[int] = None,
        unavailable: Optional[Dict[str, str]] = None,
        final: bool = False,
    ) -> Report:
        """The interval's report; the aggregator is empty afterwards."""
        with self._lock:
            groups, self._groups = self._groups, {}
            dropped, self._dropped = dict(self._dropped), collections.Counter()
            counters, self._counters = dict(self._counters), collections.Counter()
        kinds = [g.stat(kind, dev, self.top_n) for (kind, dev), g in sorted(groups.items())]
        return Report(
            seq=seq,
            pid=pid,
            backend=backend,
            start_ns=start_ns,
            end_ns=end_ns,
            sampled_ns=end_ns - start_ns if sampled_ns is None else sampled_ns,
            kinds=kinds,
            dropped=dropped,
            unavailable=dict(unavailable or {}),
            counters=counters,
            final=final,
        )
