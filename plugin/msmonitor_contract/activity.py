"""msMonitor's activity kinds, as MSPTI numbers them and msMonitor spells them: what the monitor records,
its reports carry, and the daemon's sinks and detector read."""

from __future__ import annotations

import enum
from typing import Dict

HOST = -1  # device id of host-side activity (API calls, host markers, CPU operators)
OTHER = "<other>"  # the bucket for names past a bounded table or outside the top N


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
