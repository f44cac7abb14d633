"""MSPTI's packed activity records (reference ascend-dynamic.md §C.6): each kind's struct, and the walk
from one record to the next.

The structs are ``packed, aligned(8)``: no padding between fields, 64-bit fields at unaligned offsets,
``sizeof`` rounded up to 8. Each :class:`Layout` states a kind's full field list and, for the hot path
(:mod:`.summing`), a narrower format that unpacks only what aggregation needs.

Walking: records are found either at the offsets MSPTI's ``msptiActivityGetNextRecord`` returns
(:func:`runs_at`), or by striding over each record's C ``sizeof`` (:func:`stride_offsets`). The binding
uses the second only after the first has confirmed the strides for every kind in a buffer (see
``mspti.StrideCheck``).
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from msmonitor_contract.activity import HOST, Kind

from .records import UNNAMED, CommunicationExtras, HcclExtras, HostExtras, MemoryExtras, Record, clip_name

INVALID_ID = 0xFFFFFFFF  # MSPTI's INVALID_DEVICE_ID / INVALID_STREAM_ID
EXTERNAL_CORRELATION = 8  # a kind we never enable, but must be able to step over

DATA_TYPES = {
    0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64", 7: "UINT8",
    8: "UINT16", 9: "UINT32", 10: "FP64", 11: "BFP16", 12: "INT128", 14: "HIF8", 15: "FP8E4M3",
    16: "FP8E5M2", 17: "FP8E8M0", 0xFFFF: "INVALID",
}  # fmt: skip
MEMORY_OPERATIONS = {0: "ALLOCATION", 1: "RELEASE"}
MEMCPY_KINDS = {0: "UNKNOWN", 1: "HTOH", 2: "HTOD", 3: "DTOH", 4: "DTOD", 5: "DEFAULT"}
MEMSET_NAMES = {0: "MEMSET", 1: "MEMSET_ASYNC"}

KIND_AT = struct.Struct("=i")
KIND_OF = {int(k): k for k in Kind}


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

    @property
    def in_order(self) -> bool:
        """Whether ``fast`` yields (kind, start, end, device, key) as they are: the fastest loop."""
        return self.order == SEDK


def _kernel(t: tuple, names: NameTable) -> Record:
    k, s, e, dev, stream, corr, type_ptr, name_ptr = t
    return Record(
        KIND_OF[k], s, e, device_id(dev), stream, corr, names.label(name_ptr), names.get(type_ptr) or ""
    )


def _api(t: tuple, names: NameTable) -> Record:
    k, s, e, pid, tid, corr, name_ptr = t
    return Record(KIND_OF[k], s, e, HOST, 0, corr, names.label(name_ptr), "", HostExtras(pid, tid))


def _hccl(t: tuple, names: NameTable) -> Record:
    k, s, e, dev, stream, bandwidth, name_ptr, comm_ptr = t
    extras = HcclExtras(bandwidth, names.get(comm_ptr) or "")
    return Record(KIND_OF[k], s, e, device_id(dev), stream, 0, names.label(name_ptr), "", extras)


def _communication(t: tuple, names: NameTable) -> Record:
    k, dtype, count, dev, stream, s, e, alg_ptr, name_ptr, comm_ptr, corr = t
    extras = CommunicationExtras(
        count, DATA_TYPES.get(dtype, str(dtype)), names.get(comm_ptr) or "", names.get(alg_ptr) or ""
    )
    return Record(KIND_OF[k], s, e, device_id(dev), stream, corr, names.label(name_ptr), "", extras)


def _memory(t: tuple, names: NameTable) -> Record:
    k, op, _mem_kind, corr, s, e, address, nbytes, _pid, dev, stream = t
    name = MEMORY_OPERATIONS.get(op, str(op))
    return Record(KIND_OF[k], s, e, device_id(dev), stream, corr, name, "", MemoryExtras(nbytes, address))


def _memset(t: tuple, names: NameTable) -> Record:
    k, _value, nbytes, s, e, dev, stream, corr, is_async = t
    name = MEMSET_NAMES[1 if is_async else 0]
    return Record(
        KIND_OF[k], s, e, device_id(dev), stream, corr, name, "", MemoryExtras(nbytes, 0, bool(is_async))
    )


def _memcpy(t: tuple, names: NameTable) -> Record:
    k, copy_kind, nbytes, s, e, dev, stream, corr, is_async = t
    name = MEMCPY_KINDS.get(copy_kind, str(copy_kind))
    return Record(
        KIND_OF[k], s, e, device_id(dev), stream, corr, name, "", MemoryExtras(nbytes, 0, bool(is_async))
    )


_S = struct.Struct
SEDK = (1, 2, 3, 4)  # the fast tuple is already (kind, start, end, device, key)
_API = Layout(48, _S("=iQQIIQQ4x"), _S("=iQQI4x8xQ4x"), SEDK, _api)  # device slot: pid, mapped to HOST
MARKER_STRUCT = _S("=iiiQQIIQQ4x")  # kind, flag, source, timestamp, id, objectId (2 x u32), name, domain

LAYOUTS: Dict[int, Layout] = {
    Kind.KERNEL: Layout(56, _S("=iQQIIQQQ4x"), _S("=iQQI4x8x8xQ4x"), SEDK, _kernel),
    Kind.API: _API,
    Kind.ACL_API: _API,
    Kind.NODE_API: _API,
    Kind.RUNTIME_API: _API,
    Kind.HCCL: Layout(56, _S("=iQQIIdQQ4x"), _S("=iQQI4x8xQ8x4x"), SEDK, _hccl),
    Kind.COMMUNICATION: Layout(
        72, _S("=iiQIIQQQQQQ"), _S("=i4x8xI4xQQ8xQ8x8x"), (2, 3, 1, 4), _communication
    ),
    Kind.MEMORY: Layout(
        64, _S("=iiiQQQQQIII"), _S("=ii4x8xQQ8x8x4xI4x"), (2, 3, 4, 1), _memory, MEMORY_OPERATIONS
    ),
    Kind.MEMSET: Layout(56, _S("=iIQQQIIQB7x"), _S("=i4x8xQQI4x8xB7x"), SEDK, _memset, MEMSET_NAMES),
    Kind.MEMCPY: Layout(56, _S("=iiQQQIIQB7x"), _S("=ii8xQQI4x8x8x"), (2, 3, 4, 1), _memcpy, MEMCPY_KINDS),
    Kind.MARKER: Layout(56, MARKER_STRUCT, MARKER_STRUCT, SEDK, None),
    EXTERNAL_CORRELATION: Layout(24, _S("=iiQQ"), _S("=iiQQ"), SEDK, None),
}
SIZES = {kind: layout.size for kind, layout in LAYOUTS.items()}
for _layout in LAYOUTS.values():
    assert _layout.full.size == _layout.fast.size == _layout.size, _layout


def runs_at(view: memoryview, offsets: Sequence[int]) -> List[Tuple[int, int, int]]:
    """Group MSPTI's record offsets into (offset, kind, count) runs of contiguous same-kind records.

    A record whose successor is not exactly one ``sizeof`` further (a library with larger records)
    becomes a run of its own, so parsing still reads each record at the offset MSPTI gave.
    """
    runs: List[Tuple[int, int, int]] = []
    for off in offsets:
        kind = KIND_AT.unpack_from(view, off)[0]
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
        kind = KIND_AT.unpack_from(view, off)[0]
        size = SIZES.get(kind)
        if size is None or off + size > valid:
            raise WalkError(f"cannot stride past kind {kind} at offset {off}")
        out.append(off)
        off += size
    if off != valid:
        raise WalkError(f"{valid - off} bytes left after the last record")
    return out
