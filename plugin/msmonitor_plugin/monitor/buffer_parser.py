"""One MSPTI buffer parsed in bulk, into aggregate rows or :class:`~.records.Record` lists.

Speed: runs of same-kind records go through :mod:`.summing`'s loops, which add durations into a
per-buffer dict keyed by ``(device, name pointer)``. Names are read once per distinct pointer per buffer
(:class:`~.layouts.NameTable`) — inside the complete callback, before the buffer goes back to MSPTI, as
§C.6 requires — and the few hundred resulting rows are merged into the interval's
:class:`~.aggregate.Aggregator`. Pointer identity is trusted within one buffer only: a library is free to
reuse the memory of a string later.

Walking: records are found either at the offsets MSPTI's ``msptiActivityGetNextRecord`` returns
(:meth:`BufferParser.parse` with ``offsets``), or by striding over each record's C ``sizeof``
(``offsets=None``); see :mod:`.layouts`.
"""

from __future__ import annotations

import collections
from typing import Counter, Dict, FrozenSet, List, NamedTuple, Optional, Sequence

from msmonitor_contract.activity import HOST, Kind

from .aggregate import Row
from .filters import KEEP_ALL, Filter
from .layouts import KIND_AT, KIND_OF, LAYOUTS, Layout, NameTable, WalkError, device_id, runs_at
from .markers import MarkerPairer, MarkerPoint, marker_run
from .records import UNNAMED, Record
from .summing import SHORT_RUN, Table, decode_run, sum_in_order, sum_mixed, sum_reordered

_HOST_KINDS = frozenset({Kind.API, Kind.ACL_API, Kind.NODE_API, Kind.RUNTIME_API})


class BufferResult(NamedTuple):
    rows: List[Row]  # aggregate mode
    records: List[Record]  # records mode (and completed marker ranges in both modes)
    counts: Counter[str]  # records parsed, filtered, unnamed


class _Parsed:
    """What one buffer has given so far: partial sums per kind, decoded records and marker points."""

    def __init__(self, names: NameTable) -> None:
        self.names = names
        self.tables: Dict[int, Table] = {}
        self.decoded: List[Record] = []
        self.markers: List[MarkerPoint] = []


class BufferParser:
    """Parses buffers into aggregate rows (``records=False``) or :class:`Record` lists.

    One instance per monitoring session: it holds the marker pairing state across buffers. Not
    thread-safe: buffers are parsed one at a time (the binding serialises its complete callbacks).
    """

    def __init__(self, records: bool = False, flt: Filter = KEEP_ALL) -> None:
        self.records = records
        self.filter = flt
        self.pairer = MarkerPairer()

    def parse(
        self,
        view: memoryview,
        valid: int,
        names: NameTable,
        offsets: Optional[Sequence[int]] = None,
        allowed: Optional[FrozenSet[int]] = None,
    ) -> BufferResult:
        """Parse ``view[:valid]``. With *offsets*, records are exactly there (MSPTI's walk); without,
        by strides, raising :class:`WalkError` at a kind outside *allowed* (None: any known kind)."""
        parsed = _Parsed(names)
        if offsets is None:
            self._walk_strides(view, valid, allowed, parsed)
        else:
            for off, kind, count in runs_at(view, offsets):
                layout = LAYOUTS[kind]
                self._run(view[off : off + count * layout.size], kind, layout, parsed)
        return self._finish(parsed)

    def _walk_strides(
        self, view: memoryview, valid: int, allowed: Optional[FrozenSet[int]], parsed: _Parsed
    ) -> None:
        off = 0
        mixed = not self.records
        while valid - off >= 4:
            kind = KIND_AT.unpack_from(view, off)[0]
            layout = LAYOUTS.get(kind)
            if layout is None or (allowed is not None and kind not in allowed):
                raise WalkError(f"record of kind {kind} at offset {off}")
            n = (valid - off) // layout.size
            if n == 0:
                raise WalkError(f"truncated record of kind {kind} at offset {off}")
            run = self._run(view[off : off + n * layout.size], kind, layout, parsed)
            off += layout.size * run
            if mixed and run < SHORT_RUN:
                off = sum_mixed(view, off, valid, parsed.tables, allowed)
        if off != valid:
            raise WalkError(f"{valid - off} bytes left after the last record")

    def _run(self, view: memoryview, kind: int, layout: Layout, parsed: _Parsed) -> int:
        if kind == Kind.MARKER:
            return marker_run(view, kind, parsed.names, parsed.markers)
        if self.records or layout.decode is None:
            return decode_run(view, kind, layout, parsed.names, parsed.decoded)
        table = parsed.tables.get(kind)
        if table is None:
            table = parsed.tables[kind] = {}
        if layout.in_order:
            return sum_in_order(view, kind, layout.fast, table)
        return sum_reordered(view, kind, layout.fast, table, layout.order)

    def _finish(self, parsed: _Parsed) -> BufferResult:
        counts: Counter[str] = collections.Counter()
        rows = self._rows(parsed.tables, parsed.names, counts)
        records = self._filter_records(parsed.decoded, counts)
        for point in parsed.markers:
            record, filtered = self.pairer.feed(point, self.filter)
            if filtered:
                counts["filtered"] += 1
            if record is not None:
                records.append(record)
        summed = sum(c[0] for t in parsed.tables.values() for c in t.values())
        counts["records"] += len(parsed.markers) + summed
        return BufferResult(rows, records, counts)

    def _rows(self, tables: Dict[int, Table], names: NameTable, counts: Counter[str]) -> List[Row]:
        rows: List[Row] = []
        flt = self.filter
        for kind_value, table in tables.items():
            kind = KIND_OF[kind_value]
            key_names = LAYOUTS[kind_value].key_names
            host = kind in _HOST_KINDS
            for (dev, key), (count, total, mn, mx) in table.items():
                if key_names is not None:
                    name: Optional[str] = key_names.get(key, str(key))
                else:
                    name = names.get(key)
                    if name is None:
                        counts["unnamed"] += count
                if not flt.keeps(kind, name):
                    counts["filtered"] += count
                    continue
                rows.append((kind, HOST if host else device_id(dev), name or UNNAMED, count, total, mn, mx))
        return rows

    def _filter_records(self, decoded: List[Record], counts: Counter[str]) -> List[Record]:
        counts["records"] += len(decoded)
        unnamed = sum(1 for r in decoded if r.name == UNNAMED)
        if unnamed:
            counts["unnamed"] += unnamed
        if not self.filter.active:
            return decoded
        kept = [r for r in decoded if self.filter.keeps(r.kind, None if r.name == UNNAMED else r.name)]
        counts["filtered"] += len(decoded) - len(kept)
        return kept
