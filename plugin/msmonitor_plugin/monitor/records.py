"""The one record schema every monitoring source produces (MSPTI, torch.profiler), modelled on MSPTI.

A :class:`Record` is one timed activity: a kernel, an API call, a collective, a copy, or a completed
marker range. Kind-specific fields travel in a small typed ``extras`` object. Records are tuples
(``NamedTuple``) so that building one costs what building a tuple costs; the MSPTI hot path does not
build them at all when it only aggregates (see ``layouts``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Dict, NamedTuple, Optional, Union

HOST = -1  # device id of host-side activity (API calls, host markers, CPU operators)
UNNAMED = "<unnamed>"  # the name of a record whose name pointer was NULL
OTHER = "<other>"  # the bucket for names past a bounded table or outside the top N
MAX_NAME_CHARS = 1024  # longer names (deep C++ templates) are cut: every report item stays small


class Kind(enum.IntEnum):
    """msMonitor's eleven activity kinds; the values are MSPTI's ``msptiActivityKind`` numbers."""

    MARKER = 1
    KERNEL = 2
    API = 3
    HCCL = 4
    MEMORY = 5
    MEMSET = 6
    MEMCPY = 7
    COMMUNICATION = 9
    ACL_API = 10
    NODE_API = 11
    RUNTIME_API = 12

    @property
    def label(self) -> str:
        """The spelling msMonitor uses on the command line, in config text and in JSON."""
        return _LABELS[self]

    @classmethod
    def parse(cls, label: str) -> Kind:
        """``Kind.parse("Kernel")``; exact spelling as msMonitor (case-sensitive). Raises ValueError."""
        try:
            return _BY_LABEL[label]
        except KeyError:
            raise ValueError(f"unknown activity kind {label!r} (valid: {', '.join(LABELS)})") from None


_LABELS: Dict[Kind, str] = {
    Kind.MARKER: "Marker",
    Kind.KERNEL: "Kernel",
    Kind.API: "API",
    Kind.HCCL: "Hccl",
    Kind.MEMORY: "Memory",
    Kind.MEMSET: "MemSet",
    Kind.MEMCPY: "MemCpy",
    Kind.COMMUNICATION: "Communication",
    Kind.ACL_API: "AclAPI",
    Kind.NODE_API: "NodeAPI",
    Kind.RUNTIME_API: "RuntimeAPI",
}
_BY_LABEL: Dict[str, Kind] = {label: kind for kind, label in _LABELS.items()}
LABELS = tuple(_LABELS.values())
API_KINDS = frozenset({Kind.API, Kind.ACL_API, Kind.NODE_API, Kind.RUNTIME_API})
MEMORY_KINDS = frozenset({Kind.MEMORY, Kind.MEMSET, Kind.MEMCPY})


@dataclass(frozen=True)
class CommunicationExtras:  # a dataclass: a NamedTuple field cannot be called ``count``
    count: int  # elements
    data_type: str  # msptiCommunicationDataType name, e.g. "FP16"
    comm_name: str  # communicator (group) name
    alg_type: str


class HcclExtras(NamedTuple):
    bandwidth_gbps: float
    comm_name: str


class MarkerExtras(NamedTuple):
    domain: str  # "default" when MSPTI gave none
    source: str  # "Host" or "Device"
    flag: int  # msptiActivityFlag of the opening record (instantaneous / start, with or without device)
    id: int  # the marker id pairing start and end
    process_id: int = 0  # host markers
    thread_id: int = 0
    end_thread_id: Optional[int] = None  # where a range ended, when not on the thread it began on


class HostExtras(NamedTuple):
    """Where a host-side call ran (API kinds)."""

    process_id: int
    thread_id: int


class MemoryExtras(NamedTuple):
    bytes: int
    address: int = 0  # Memory only
    is_async: bool = False  # MemSet, MemCpy


Extras = Union[CommunicationExtras, HcclExtras, MarkerExtras, HostExtras, MemoryExtras, None]


class Record(NamedTuple):
    """One activity. Times are ns since the Unix epoch; ``device`` is ``HOST`` (-1) for host work."""

    kind: Kind
    start_ns: int
    end_ns: int
    device: int
    stream: int
    correlation_id: int
    name: str
    type: str = ""  # e.g. MSPTI's task type "KERNEL_AIVEC", or "cpu_op" from torch
    extras: Extras = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def domain(self) -> Optional[str]:
        """The marker domain; None for other kinds."""
        return self.extras.domain if isinstance(self.extras, MarkerExtras) else None


def clip_name(name: str) -> str:
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 1] + "…"
