"""Synthetic MSPTI buffers: records packed with the documented layouts, names behind fake pointers.

For parser tests and the ingest benchmark. The layouts themselves are checked against C separately
(the fake libmspti.so is compiled from structs declared as in the MSPTI headers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, TypedDict

from msmonitor_contract.activity import Kind
from msmonitor_plugin.monitor.layouts import LAYOUTS, MARKER_STRUCT

if TYPE_CHECKING:  # typing's own Unpack is 3.11+, and these annotations are never evaluated
    from typing_extensions import Unpack

BASE_NS = 1_775_186_328_012_443_375


# A record's fields that tests leave at a fixed value, by kind: one group each, so that a builder's
# signature is what tests vary (times, device, name) and the rest can still be set by keyword.


class KernelIds(TypedDict, total=False):
    stream: int  # 3
    corr: int  # correlation id, 1
    type_: Optional[str]  # "KERNEL_AIVEC"


class ApiIds(TypedDict, total=False):
    pid: int  # 100
    tid: int  # 101
    corr: int  # 1


class MarkerFields(TypedDict, total=False):
    a: int  # host: pid; device: the device (0)
    b: int  # host: tid; device: the stream (0)
    name: Optional[str]
    domain: Optional[str]


class MarkerWhere(TypedDict, total=False):
    device: int  # 0
    domain: Optional[str]  # none


class Strings:
    """Fake C strings: each distinct text gets a stable fake address."""

    def __init__(self) -> None:
        self.by_ptr: Dict[int, bytes] = {}
        self._by_text: Dict[str, int] = {}

    def ptr(self, text: Optional[str]) -> int:
        if text is None:
            return 0
        if text not in self._by_text:
            address = 0x7F00_0000_1000 + 64 * len(self._by_text)
            self._by_text[text] = address
            self.by_ptr[address] = text.encode()
        return self._by_text[text]

    def read(self, ptr: int) -> bytes:
        return self.by_ptr[ptr]


class BufferBuilder:
    def __init__(self, strings: Optional[Strings] = None) -> None:
        self.strings = strings or Strings()
        self.data = bytearray()
        self.offsets: List[int] = []

    def _add(self, kind: int, *fields: object) -> None:
        self.offsets.append(len(self.data))
        self.data += LAYOUTS[kind].full.pack(int(kind), *fields)

    def kernel(
        self, start: int, end: int, device: int = 0, name: Optional[str] = "k", **ids: Unpack[KernelIds]
    ) -> BufferBuilder:
        stream, corr, type_ = ids.get("stream", 3), ids.get("corr", 1), ids.get("type_", "KERNEL_AIVEC")
        self._add(
            Kind.KERNEL, start, end, device, stream, corr, self.strings.ptr(type_), self.strings.ptr(name)
        )
        return self

    def api(
        self,
        start: int,
        end: int,
        name: Optional[str] = "aclnnAdd",
        kind: Kind = Kind.API,
        **ids: Unpack[ApiIds],
    ) -> BufferBuilder:
        pid, tid, corr = ids.get("pid", 100), ids.get("tid", 101), ids.get("corr", 1)
        self._add(kind, start, end, pid, tid, corr, self.strings.ptr(name))
        return self

    def hccl(
        self, start: int, end: int, device: int = 0, name: Optional[str] = "hcom_allReduce_1"
    ) -> BufferBuilder:
        self._add(Kind.HCCL, start, end, device, 4, 12.5, self.strings.ptr(name), self.strings.ptr("group_0"))
        return self

    def communication(
        self, start: int, end: int, device: int = 0, name: Optional[str] = "allreduce"
    ) -> BufferBuilder:
        self._add(
            Kind.COMMUNICATION,
            3,
            1024,
            device,
            5,
            start,
            end,
            self.strings.ptr("RING"),
            self.strings.ptr(name),
            self.strings.ptr("group_0"),
            9,
        )
        return self

    def memory(self, start: int, end: int, device: int = 0, op: int = 0) -> BufferBuilder:
        self._add(Kind.MEMORY, op, 1, 9, start, end, 0x1000, 4096, 100, device, 6)
        return self

    def memset(self, start: int, end: int, device: int = 0, is_async: int = 1) -> BufferBuilder:
        self._add(Kind.MEMSET, 0, 4096, start, end, device, 6, 9, is_async)
        return self

    def memcpy(self, start: int, end: int, device: int = 0, copy_kind: int = 2) -> BufferBuilder:
        self._add(Kind.MEMCPY, copy_kind, 8192, start, end, device, 6, 9, 1)
        return self

    def marker(
        self, flag: int, source: int, ts: int, mid: int, **fields: Unpack[MarkerFields]
    ) -> BufferBuilder:
        a, b = fields.get("a", 0), fields.get("b", 0)
        name, domain = self.strings.ptr(fields.get("name")), self.strings.ptr(fields.get("domain"))
        self.offsets.append(len(self.data))
        self.data += MARKER_STRUCT.pack(int(Kind.MARKER), flag, source, ts, mid, a, b, name, domain)
        return self

    def marker_range(
        self, mid: int, start: int, end: int, name: Optional[str], **where: Unpack[MarkerWhere]
    ) -> BufferBuilder:
        """A range with device: host start, device start, device end, host end (as MSPTI emits)."""
        device, domain = where.get("device", 0), where.get("domain")
        self.marker(16, 0, start, mid, a=100, b=101, name=name, domain=domain)
        self.marker(16, 1, start + 10, mid, a=device, b=7)
        self.marker(32, 1, end + 10, mid, a=device, b=7)
        self.marker(32, 0, end, mid, a=100, b=101)
        return self

    def view(self) -> memoryview:
        return memoryview(bytes(self.data))
