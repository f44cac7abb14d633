"""MSPTI's packed activity records (reference ascend-dynamic.md §C.6), parsed in bulk.

The structs are ``packed, aligned(8)``: no padding between fields, 64-bit fields at unaligned offsets,
``sizeof`` rounded up to 8. Each :class:`Layout` states a kind's full field list and, for the hot path,
a narrower format that unpacks only what aggregation needs.

Speed: ``struct.iter_unpack`` walks a run of same-kind records at C speed and the Python loop only adds
durations into a per-buffer dict keyed by ``(device, name pointer)``: no object per record, no string
per record. Names are read once per distinct pointer per buffer (:class:`NameTable`) — inside the
complete callback, before the buffer goes back to MSPTI, as §C.6 requires — and the few hundred
resulting rows are merged into the interval's :class:`~.aggregate.Aggregator`. Pointer identity is
trusted within one buffer only: a library is free to reuse the memory of a string later.

Walking: records are found either at the offsets MSPTI's ``msptiActivityGetNextRecord`` returns
(:meth:`BufferParser.parse` with ``offsets``), or by striding over each record's C ``sizeof``
(``offsets=None``). The binding uses the second only after the first has confirmed the strides for
every kind in a buffer (see ``mspti.StrideCheck``).
"""

from __future__ import annotations

import collections
import struct
from typing import (
    Callable,
    Counter,
    Dict,
    FrozenSet,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from msmonitor_contract.activity import HOST, Kind
from msmonitor_contract.report import DEFAULT_MARKER_DOMAIN

from .aggregate import Row
from .filters import KEEP_ALL, Filter
from .records import (
    UNNAMED,
    CommunicationExtras,
    HcclExtras,
    HostExtras,
    MarkerExtras,
    MemoryExtras,
    Record,
    clip_name,
)

INVALID_ID = 0xFFFFFFFF  # MSPTI's INVALID_DEVICE_ID / INVALID_STREAM_ID
EXTERNAL_CORRELATION = 8  # a kind we never enable, but must be able to step over

# msptiActivityFlag
FLAG_INSTANT, FLAG_START, FLAG_END = 1, 2, 4
FLAG_INSTANT_DEV, FLAG_START_DEV, FLAG_END_DEV = 8, 16, 32
SOURCE_HOST, SOURCE_DEVICE = 0, 1

DATA_TYPES = {
    0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64", 7: "UINT8",
    8: "UINT16", 9: "UINT32", 10: "FP64", 11: "BFP16", 12: "INT128", 14: "HIF8", 15: "FP8E4M3",
    16: "FP8E5M2", 17: "FP8E8M0", 0xFFFF: "INVALID",
}  # fmt: skip
MEMORY_OPERATIONS = {0: "ALLOCATION", 1: "RELEASE"}
MEMCPY_KINDS = {0: "UNKNOWN", 1: "HTOH", 2: "HTOD", 3: "DTOH", 4: "DTOD", 5: "DEFAULT"}
MEMSET_NAMES = {0: "MEMSET", 1: "MEMSET_ASYNC"}

_KIND_AT = struct.Struct("=i")
_KIND_OF = {int(k): k for k in Kind}


class WalkError(Exception):
    """The buffer cannot be walked by strides (unknown or unconfirmed kind, or a truncated record)."""


def device_id(raw: int) -> int:
    return HOST if raw == INVALID_ID else raw


class NameTable:
    """Strings behind the pointers of one buffer, each read once. ``read`` copies a C string."""

    __slots__ = ("_cache", "_read")

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        self._cache: Dict[int, str] = {}

    def get(self, ptr: int) -> Optional[str]:
        """The string at *ptr*; None for NULL."""
        if not ptr:
            return None
        name = self._cache.get(ptr)
        if name is None:
            name = self._cache[ptr] = clip_name(self._read(ptr).decode("utf-8", "replace"))
        return name

    def label(self, ptr: int) -> str:
        return self.get(ptr) or UNNAMED


# A decoder turns one full tuple into a Record; markers are paired instead (MarkerPairer).
Decoder = Callable[[tuple, NameTable], Record]


class Layout(NamedTuple):
    """One record struct. ``fast`` unpacks (kind, start, end, device, key) in ``order``'s positions."""

    size: int  # C sizeof: the stride between records
    full: struct.Struct
    fast: struct.Struct
    order: Tuple[int, int, int, int]  # tuple positions of start, end, device, key in ``fast``
    decode: Optional[Decoder]
    key_names: Optional[Dict[int, str]] = None  # when the key is an enum, not a name pointer


def _kernel(t: tuple, names: NameTable) -> Record:
    k, s, e, dev, stream, corr, type_ptr, name_ptr = t
    return Record(
        _KIND_OF[k], s, e, device_id(dev), stream, corr, names.label(name_ptr), names.get(type_ptr) or ""
    )


def _api(t: tuple, names: NameTable) -> Record:
    k, s, e, pid, tid, corr, name_ptr = t
    return Record(_KIND_OF[k], s, e, HOST, 0, corr, names.label(name_ptr), "", HostExtras(pid, tid))


def _hccl(t: tuple, names: NameTable) -> Record:
    k, s, e, dev, stream, bandwidth, name_ptr, comm_ptr = t
    extras = HcclExtras(bandwidth, names.get(comm_ptr) or "")
    return Record(_KIND_OF[k], s, e, device_id(dev), stream, 0, names.label(name_ptr), "", extras)


def _communication(t: tuple, names: NameTable) -> Record:
    k, dtype, count, dev, stream, s, e, alg_ptr, name_ptr, comm_ptr, corr = t
    extras = CommunicationExtras(
        count, DATA_TYPES.get(dtype, str(dtype)), names.get(comm_ptr) or "", names.get(alg_ptr) or ""
    )
    return Record(_KIND_OF[k], s, e, device_id(dev), stream, corr, names.label(name_ptr), "", extras)


def _memory(t: tuple, names: NameTable) -> Record:
    k, op, _mem_kind, corr, s, e, address, nbytes, _pid, dev, stream = t
    name = MEMORY_OPERATIONS.get(op, str(op))
    return Record(_KIND_OF[k], s, e, device_id(dev), stream, corr, name, "", MemoryExtras(nbytes, address))


def _memset(t: tuple, names: NameTable) -> Record:
    k, _value, nbytes, s, e, dev, stream, corr, is_async = t
    name = MEMSET_NAMES[1 if is_async else 0]
    return Record(
        _KIND_OF[k], s, e, device_id(dev), stream, corr, name, "", MemoryExtras(nbytes, 0, bool(is_async))
    )


def _memcpy(t: tuple, names: NameTable) -> Record:
    k, copy_kind, nbytes, s, e, dev, stream, corr, is_async = t
    name = MEMCPY_KINDS.get(copy_kind, str(copy_kind))
    return Record(
        _KIND_OF[k], s, e, device_id(dev), stream, corr, name, "", MemoryExtras(nbytes, 0, bool(is_async))
    )


_S = struct.Struct
_SEDK = (1, 2, 3, 4)  # the fast tuple is already (kind, start, end, device, key)
_API = Layout(48, _S("=iQQIIQQ4x"), _S("=iQQI4x8xQ4x"), _SEDK, _api)  # device slot: pid, mapped to HOST
MARKER_STRUCT = _S("=iiiQQIIQQ4x")  # kind, flag, source, timestamp, id, objectId (2 x u32), name, domain

LAYOUTS: Dict[int, Layout] = {
    Kind.KERNEL: Layout(56, _S("=iQQIIQQQ4x"), _S("=iQQI4x8x8xQ4x"), _SEDK, _kernel),
    Kind.API: _API,
    Kind.ACL_API: _API,
    Kind.NODE_API: _API,
    Kind.RUNTIME_API: _API,
    Kind.HCCL: Layout(56, _S("=iQQIIdQQ4x"), _S("=iQQI4x8xQ8x4x"), _SEDK, _hccl),
    Kind.COMMUNICATION: Layout(
        72, _S("=iiQIIQQQQQQ"), _S("=i4x8xI4xQQ8xQ8x8x"), (2, 3, 1, 4), _communication
    ),
    Kind.MEMORY: Layout(
        64, _S("=iiiQQQQQIII"), _S("=ii4x8xQQ8x8x4xI4x"), (2, 3, 4, 1), _memory, MEMORY_OPERATIONS
    ),
    Kind.MEMSET: Layout(56, _S("=iIQQQIIQB7x"), _S("=i4x8xQQI4x8xB7x"), _SEDK, _memset, MEMSET_NAMES),
    Kind.MEMCPY: Layout(56, _S("=iiQQQIIQB7x"), _S("=ii8xQQI4x8x8x"), (2, 3, 4, 1), _memcpy, MEMCPY_KINDS),
    Kind.MARKER: Layout(56, MARKER_STRUCT, MARKER_STRUCT, _SEDK, None),
    EXTERNAL_CORRELATION: Layout(24, _S("=iiQQ"), _S("=iiQQ"), _SEDK, None),
}
SIZES = {kind: layout.size for kind, layout in LAYOUTS.items()}
for _layout in LAYOUTS.values():
    assert _layout.full.size == _layout.fast.size == _layout.size, _layout


# The hot loops. Each consumes records of one kind from the start of *view* and stops at the first record
# of another kind; it returns how many it consumed. Partial sums go into *table*: (device, key) ->
# [count, total, min, max].
Table = Dict[Tuple[int, int], List[int]]


def _sum_sedk(view: memoryview, kind: int, fmt: struct.Struct, table: Table) -> int:
    n = 0
    get = table.get
    for k, s, e, dev, key in fmt.iter_unpack(view):
        if k != kind:
            break
        n += 1
        d = e - s
        tk = (dev, key)
        a = get(tk)
        if a is None:
            table[tk] = [1, d, d, d]
        else:
            a[0] += 1
            a[1] += d
            if d < a[2]:
                a[2] = d
            elif d > a[3]:
                a[3] = d
    return n


def _sum_ordered(
    view: memoryview, kind: int, fmt: struct.Struct, table: Table, order: Tuple[int, ...]
) -> int:
    """The same for layouts whose fields come in another order (rarer kinds: a little slower)."""
    i_s, i_e, i_dev, i_key = order
    n = 0
    for t in fmt.iter_unpack(view):
        if t[0] != kind:
            break
        n += 1
        d = t[i_e] - t[i_s]
        tk = (t[i_dev], t[i_key])
        a = table.get(tk)
        if a is None:
            table[tk] = [1, d, d, d]
        else:
            a[0] += 1
            a[1] += d
            if d < a[2]:
                a[2] = d
            elif d > a[3]:
                a[3] = d
    return n


# Interleaved kinds: when runs are short, restarting iter_unpack per run costs more than the records, so
# records of the common layouts — (kind, start, end, u32) then a name pointer — are taken one at a time.
_PREFIX = struct.Struct("=iQQI")  # kind, start, end, device (pid for the API kinds)
_PTR = struct.Struct("=Q")
_MIXED: Dict[int, Tuple[int, int]] = {  # kind -> (size, offset of the name pointer)
    Kind.KERNEL: (56, 44),
    Kind.API: (48, 36),
    Kind.ACL_API: (48, 36),
    Kind.NODE_API: (48, 36),
    Kind.RUNTIME_API: (48, 36),
    Kind.HCCL: (56, 36),
}
SHORT_RUN = 4  # a run this short switches to record-at-a-time ...
LONG_STREAK = 8  # ... until this many records of one kind follow each other (break-even: ~4)


def _sum_mixed(
    view: memoryview, off: int, valid: int, tables: Dict[int, Table], allowed: Optional[FrozenSet[int]]
) -> int:
    """Aggregate records one at a time from *off*; returns where it stopped (a kind it does not take,
    or a long streak of one kind, which runs handle faster)."""
    prefix = _PREFIX.unpack_from
    ptr = _PTR.unpack_from
    last, streak = -1, 0
    table: Table = {}
    while valid - off >= 24:
        k, s, e, dev = prefix(view, off)
        spec = _MIXED.get(k)
        if spec is None or (allowed is not None and k not in allowed) or off + spec[0] > valid:
            break
        if k == last:
            streak += 1
            if streak >= LONG_STREAK:
                break
        else:
            last, streak = k, 0
            table = tables.get(k) or tables.setdefault(k, {})
        d = e - s
        tk = (dev, ptr(view, off + spec[1])[0])
        a = table.get(tk)
        if a is None:
            table[tk] = [1, d, d, d]
        else:
            a[0] += 1
            a[1] += d
            if d < a[2]:
                a[2] = d
            elif d > a[3]:
                a[3] = d
        off += spec[0]
    return off


def _decode_run(view: memoryview, kind: int, layout: Layout, names: NameTable, out: List[Record]) -> int:
    n = 0
    decode = layout.decode
    for t in layout.full.iter_unpack(view):
        if t[0] != kind:
            break
        n += 1
        if decode is not None:
            out.append(decode(t, names))
    return n


# A marker point as MSPTI delivers it, names already copied: flag, source, timestamp, id, object ids.
class MarkerPoint(NamedTuple):
    flag: int
    source: int
    timestamp: int
    id: int
    obj_a: int  # processId (host) or deviceId (device)
    obj_b: int  # threadId (host) or streamId (device)
    name: Optional[str]
    domain: Optional[str]


def _marker_run(view: memoryview, kind: int, names: NameTable, out: List[MarkerPoint]) -> int:
    n = 0
    for k, flag, source, ts, mid, a, b, name_ptr, domain_ptr in MARKER_STRUCT.iter_unpack(view):
        if k != kind:
            break
        n += 1
        out.append(MarkerPoint(flag, source, ts, mid, a, b, names.get(name_ptr), names.get(domain_ptr)))
    return n


class MarkerPairer:
    """Turns marker points into ranges (host and device) across buffers, with bounded memory.

    Host ranges pair START/END points by id on the host; device ranges pair the device-side points of
    ``*_WITH_DEVICE`` markers, named after their host opening record (device points carry no name).
    Instantaneous markers become zero-length ranges. The filter decides at the opening record, so a
    dropped range never completes. Open entries past ``max_open`` are evicted oldest first and counted.
    """

    def __init__(self, max_open: int = 65536) -> None:
        self.max_open = max_open
        self.unmatched = 0
        self._host: Dict[int, Tuple[int, str, str, int, int, int, bool]] = collections.OrderedDict()
        self._device: Dict[int, Tuple[int, int, int]] = collections.OrderedDict()
        self._device_names: Dict[int, Tuple[str, str, bool]] = collections.OrderedDict()

    def feed(self, p: MarkerPoint, flt: Filter) -> Tuple[Optional[Record], bool]:
        """The range this point completes (if any) and whether it was filtered out."""
        if p.source == SOURCE_HOST:
            return self._host_point(p, flt)
        return self._device_point(p)

    def _host_point(self, p: MarkerPoint, flt: Filter) -> Tuple[Optional[Record], bool]:
        if p.flag in (FLAG_END, FLAG_END_DEV):
            opened = self._host.pop(p.id, None)
            if opened is None:
                self.unmatched += 1
                return None, False
            start, name, domain, flag, pid, tid, kept = opened
            if not kept:
                return None, True
            end_tid = p.obj_b if p.obj_b != tid else None
            marker = _marker(start, p.timestamp, HOST, 0, name, domain, "Host", flag, p.id, pid, tid, end_tid)
            return marker, False
        name = p.name or UNNAMED
        domain = p.domain or DEFAULT_MARKER_DOMAIN
        kept = flt.keeps_marker(p.source, p.flag, p.name)
        if p.flag in (FLAG_INSTANT_DEV, FLAG_START_DEV):
            self._remember(self._device_names, p.id, (name, domain, kept))
        if p.flag in (FLAG_INSTANT, FLAG_INSTANT_DEV):
            if not kept:
                return None, True
            return _marker(
                p.timestamp, p.timestamp, HOST, 0, name, domain, "Host", p.flag, p.id, p.obj_a, p.obj_b
            ), False
        self._remember(self._host, p.id, (p.timestamp, name, domain, p.flag, p.obj_a, p.obj_b, kept))
        return None, False

    def _device_point(self, p: MarkerPoint) -> Tuple[Optional[Record], bool]:
        if p.flag == FLAG_START_DEV:
            self._remember(self._device, p.id, (p.timestamp, p.obj_a, p.obj_b))
            return None, False
        if p.flag == FLAG_END_DEV:
            opened = self._device.pop(p.id, None)
            if opened is None:
                self.unmatched += 1
                return None, False
            start, dev, stream = opened
        else:  # instantaneous, with device
            start, dev, stream = p.timestamp, p.obj_a, p.obj_b
        name, domain, kept = self._device_names.pop(
            p.id, (p.name or UNNAMED, p.domain or DEFAULT_MARKER_DOMAIN, True)
        )
        if not kept:
            return None, True
        return _marker(
            start, p.timestamp, device_id(dev), stream, name, domain, "Device", p.flag, p.id, 0, 0
        ), False

    def _remember(self, table: Dict, key: int, value: tuple) -> None:
        table[key] = value
        if len(table) > self.max_open:
            table.pop(next(iter(table)))
            self.unmatched += 1


def _marker(
    start: int,
    end: int,
    dev: int,
    stream: int,
    name: str,
    domain: str,
    source: str,
    flag: int,
    mid: int,
    pid: int,
    tid: int,
    end_tid: Optional[int] = None,
) -> Record:
    extras = MarkerExtras(domain, source, flag, mid, pid, tid, end_tid)
    return Record(Kind.MARKER, start, end, dev, stream, 0, name, "", extras)


class BufferResult(NamedTuple):
    rows: List[Row]  # aggregate mode
    records: List[Record]  # records mode (and completed marker ranges in both modes)
    counts: Counter[str]  # records parsed, filtered, unnamed


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
        tables: Dict[int, Table] = {}
        decoded: List[Record] = []
        markers: List[MarkerPoint] = []
        if offsets is None:
            self._walk_strides(view, valid, allowed, tables, decoded, markers, names)
        else:
            for off, kind, count in runs_at(view, offsets):
                layout = LAYOUTS[kind]
                self._run(
                    view[off : off + count * layout.size], kind, layout, tables, decoded, markers, names
                )
        return self._finish(tables, decoded, markers, names)

    def _walk_strides(
        self,
        view: memoryview,
        valid: int,
        allowed: Optional[FrozenSet[int]],
        tables: Dict[int, Table],
        decoded: List[Record],
        markers: List[MarkerPoint],
        names: NameTable,
    ) -> None:
        off = 0
        mixed = not self.records
        while valid - off >= 4:
            kind = _KIND_AT.unpack_from(view, off)[0]
            layout = LAYOUTS.get(kind)
            if layout is None or (allowed is not None and kind not in allowed):
                raise WalkError(f"record of kind {kind} at offset {off}")
            n = (valid - off) // layout.size
            if n == 0:
                raise WalkError(f"truncated record of kind {kind} at offset {off}")
            run = self._run(view[off : off + n * layout.size], kind, layout, tables, decoded, markers, names)
            off += layout.size * run
            if mixed and run < SHORT_RUN:
                off = _sum_mixed(view, off, valid, tables, allowed)
        if off != valid:
            raise WalkError(f"{valid - off} bytes left after the last record")

    def _run(
        self,
        view: memoryview,
        kind: int,
        layout: Layout,
        tables: Dict[int, Table],
        decoded: List[Record],
        markers: List[MarkerPoint],
        names: NameTable,
    ) -> int:
        if kind == Kind.MARKER:
            return _marker_run(view, kind, names, markers)
        if self.records or layout.decode is None:
            return _decode_run(view, kind, layout, names, decoded)
        table = tables.get(kind)
        if table is None:
            table = tables[kind] = {}
        if layout.order is _SEDK:
            return _sum_sedk(view, kind, layout.fast, table)
        return _sum_ordered(view, kind, layout.fast, table, layout.order)

    def _finish(
        self, tables: Dict[int, Table], decoded: List[Record], markers: List[MarkerPoint], names: NameTable
    ) -> BufferResult:
        counts: Counter[str] = collections.Counter()
        rows = self._rows(tables, names, counts)
        records = self._filter_records(decoded, counts)
        for point in markers:
            record, filtered = self.pairer.feed(point, self.filter)
            if filtered:
                counts["filtered"] += 1
            if record is not None:
                records.append(record)
        counts["records"] += len(markers) + sum(c[0] for t in tables.values() for c in t.values())
        return BufferResult(rows, records, counts)

    def _rows(self, tables: Dict[int, Table], names: NameTable, counts: Counter[str]) -> List[Row]:
        rows: List[Row] = []
        flt = self.filter
        for kind_value, table in tables.items():
            kind = _KIND_OF[kind_value]
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


_HOST_KINDS = frozenset({Kind.API, Kind.ACL_API, Kind.NODE_API, Kind.RUNTIME_API})


def runs_at(view: memoryview, offsets: Sequence[int]) -> List[Tuple[int, int, int]]:
    """Group MSPTI's record offsets into (offset, kind, count) runs of contiguous same-kind records.

    A record whose successor is not exactly one ``sizeof`` further (a library with larger records)
    becomes a run of its own, so parsing still reads each record at the offset MSPTI gave.
    """
    runs: List[Tuple[int, int, int]] = []
    for off in offsets:
        kind = _KIND_AT.unpack_from(view, off)[0]
        if kind not in LAYOUTS:
            raise WalkError(f"record of unknown kind {kind} at offset {off}")
        if runs:
            start, run_kind, count = runs[-1]
            if run_kind == kind and start + count * SIZES[kind] == off:
                runs[-1] = (start, kind, count + 1)
                continue
        runs.append((off, kind, 1))
    return runs


def stride_offsets(view: memoryview, valid: int) -> List[int]:
    """The offsets a stride walk would visit (to compare with MSPTI's own walk); WalkError if stuck."""
    out: List[int] = []
    off = 0
    while valid - off >= 4:
        kind = _KIND_AT.unpack_from(view, off)[0]
        size = SIZES.get(kind)
        if size is None or off + size > valid:
            raise WalkError(f"cannot stride past kind {kind} at offset {off}")
        out.append(off)
        off += size
    if off != valid:
        raise WalkError(f"{valid - off} bytes left after the last record")
    return out
