"""The hot loops of MSPTI's buffer parsing: records summed (or decoded) at C speed, no object per record.

``struct.iter_unpack`` walks a run of same-kind records and the Python loop only adds durations into a
per-buffer dict keyed by ``(device, name pointer)``: no object per record, no string per record. Each run
loop consumes records of one kind from the start of *view*, stops at the first record of another kind
and returns how many it consumed.
"""

from __future__ import annotations

import struct
from typing import Dict, FrozenSet, List, Optional, Tuple

from msmonitor_contract.activity import Kind

from .layouts import Layout, NameTable
from .records import Record

# Partial sums of one kind: (device, key) -> [count, total, min, max].
Table = Dict[Tuple[int, int], List[int]]


def sum_in_order(view: memoryview, kind: int, fmt: struct.Struct, table: Table) -> int:
    """Sum a run into *table*, *fmt* yielding (kind, start, end, device, key) as they are."""
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


def sum_reordered(
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


def sum_mixed(
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


def decode_run(view: memoryview, kind: int, layout: Layout, names: NameTable, out: List[Record]) -> int:
    """Decode a run into *out*, one :class:`Record` each (a kind without a decoder is stepped over)."""
    n = 0
    decode = layout.decode
    for t in layout.full.iter_unpack(view):
        if t[0] != kind:
            break
        n += 1
        if decode is not None:
            out.append(decode(t, names))
    return n
