"""MSPTI's marker records (``mstx``): points as MSPTI delivers them, paired into ranges across buffers.

A marker is not one record but two points (start and end; or one, instantaneous), on the host and, for
the ``*_WITH_DEVICE`` markers, on the device too. The points of a range may arrive in different buffers.
"""

from __future__ import annotations

import collections
from typing import Dict, List, NamedTuple, Optional, Tuple

from msmonitor_contract.activity import HOST, Kind
from msmonitor_contract.report import DEFAULT_MARKER_DOMAIN

from .filters import Filter
from .layouts import MARKER_STRUCT, NameTable, device_id
from .records import UNNAMED, MarkerExtras, Record

# msptiActivityFlag
FLAG_INSTANT, FLAG_START, FLAG_END = 1, 2, 4
FLAG_INSTANT_DEV, FLAG_START_DEV, FLAG_END_DEV = 8, 16, 32
SOURCE_HOST, SOURCE_DEVICE = 0, 1


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


def marker_run(view: memoryview, kind: int, names: NameTable, out: List[MarkerPoint]) -> int:
    """Read the marker points at the start of *view* into *out*, up to the first record of another kind;
    how many it read."""
    n = 0
    for k, flag, source, ts, mid, a, b, name_ptr, domain_ptr in MARKER_STRUCT.iter_unpack(view):
        if k != kind:
            break
        n += 1
        out.append(MarkerPoint(flag, source, ts, mid, a, b, names.get(name_ptr), names.get(domain_ptr)))
    return n


class _HostOpening(NamedTuple):
    """A host range's opening point, waiting for its end."""

    start: int
    name: str
    extras: MarkerExtras
    kept: bool  # what the filter said of it


class _DeviceOpening(NamedTuple):
    start: int
    device: int
    stream: int


class _DeviceName(NamedTuple):
    """What a device range takes from its host opening point (device points carry no name)."""

    name: str
    domain: str
    kept: bool


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
        self._host: Dict[int, _HostOpening] = collections.OrderedDict()
        self._device: Dict[int, _DeviceOpening] = collections.OrderedDict()
        self._device_names: Dict[int, _DeviceName] = collections.OrderedDict()

    def feed(self, p: MarkerPoint, flt: Filter) -> Tuple[Optional[Record], bool]:
        """The range this point completes (if any) and whether it was filtered out."""
        if p.source == SOURCE_HOST:
            return self._host_point(p, flt)
        return self._device_point(p)

    def _host_point(self, p: MarkerPoint, flt: Filter) -> Tuple[Optional[Record], bool]:
        if p.flag in (FLAG_END, FLAG_END_DEV):
            return self._host_end(p)
        name = p.name or UNNAMED
        domain = p.domain or DEFAULT_MARKER_DOMAIN
        kept = flt.keeps_marker(p.source, p.flag, p.name)
        if p.flag in (FLAG_INSTANT_DEV, FLAG_START_DEV):
            self._remember(self._device_names, p.id, _DeviceName(name, domain, kept))
        extras = MarkerExtras(domain, "Host", p.flag, p.id, p.obj_a, p.obj_b)
        if p.flag in (FLAG_INSTANT, FLAG_INSTANT_DEV):
            if not kept:
                return None, True
            return _marker(p.timestamp, p.timestamp, name, extras), False
        self._remember(self._host, p.id, _HostOpening(p.timestamp, name, extras, kept))
        return None, False

    def _host_end(self, p: MarkerPoint) -> Tuple[Optional[Record], bool]:
        opened = self._host.pop(p.id, None)
        if opened is None:
            self.unmatched += 1
            return None, False
        if not opened.kept:
            return None, True
        extras = opened.extras
        if p.obj_b != extras.thread_id:
            extras = extras._replace(end_thread_id=p.obj_b)
        return _marker(opened.start, p.timestamp, opened.name, extras), False

    def _device_point(self, p: MarkerPoint) -> Tuple[Optional[Record], bool]:
        if p.flag == FLAG_START_DEV:
            self._remember(self._device, p.id, _DeviceOpening(p.timestamp, p.obj_a, p.obj_b))
            return None, False
        if p.flag == FLAG_END_DEV:
            opened = self._device.pop(p.id, None)
            if opened is None:
                self.unmatched += 1
                return None, False
        else:  # instantaneous, with device
            opened = _DeviceOpening(p.timestamp, p.obj_a, p.obj_b)
        named = self._device_names.pop(
            p.id, _DeviceName(p.name or UNNAMED, p.domain or DEFAULT_MARKER_DOMAIN, True)
        )
        if not named.kept:
            return None, True
        extras = MarkerExtras(named.domain, "Device", p.flag, p.id)
        where = (device_id(opened.device), opened.stream)
        return _marker(opened.start, p.timestamp, named.name, extras, where), False

    def _remember(self, table: Dict, key: int, value: tuple) -> None:
        table[key] = value
        if len(table) > self.max_open:
            table.pop(next(iter(table)))
            self.unmatched += 1


def _marker(
    start: int, end: int, name: str, extras: MarkerExtras, where: Tuple[int, int] = (HOST, 0)
) -> Record:
    """A completed range; *where*: its device and stream."""
    device, stream = where
    return Record(Kind.MARKER, start, end, device, stream, 0, name, "", extras)
