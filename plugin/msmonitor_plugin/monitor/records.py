"""The one record schema every monitoring source produces (MSPTI, torch.profiler), modelled on MSPTI.

A :class:`Record` is one timed activity: a kernel, an API call, a collective, a copy, or a completed
marker range. Kind-specific fields travel in a small typed ``extras`` object. Records are tuples
(``NamedTuple``) so that building one costs what building a tuple costs; the MSPTI hot path does not
build them at all when it only aggregates (see ``summing``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional, Union

from msmonitor_contract.activity import Kind

UNNAMED = "<unnamed>"  # the name of a record whose name pointer was NULL
MAX_NAME_CHARS = 1024  # longer names (deep C++ templates) are cut: every report item stays small


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
