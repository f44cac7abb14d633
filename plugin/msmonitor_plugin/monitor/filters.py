"""msMonitor's ``--filter`` (``NPU_MONITOR_FILTER``): ``"Kind:sub1,sub2;Kind:sub"``.

Semantics, as msMonitor's plugin implements them (``InputParser::str2FilterItems`` and
``MsptiMonitor::ShouldKeepRecord``):

- Parsing: items are split on ``;`` and then ``:``; empty tokens are skipped and tokens are trimmed of
  spaces. An item that does not split into exactly a kind and a list, or whose kind is not one of the
  eleven spellings, is ignored. Substrings are split on ``,``.
- An empty filter (or one with no valid item) keeps everything.
- Memory, MemSet and MemCpy are never filtered.
- A kind not named in a non-empty filter is dropped.
- A named kind keeps a record when its name contains any of the substrings (case-sensitive). A record
  without a name is dropped.
- Markers: only host markers that carry a name (instantaneous or start) are matched; end markers and
  device-side markers are kept, so a range is kept or dropped by the name on its opening record.

One deliberate difference: msMonitor drops every Hccl record as soon as a filter is set, even when the
filter names Hccl (its switch has no Hccl case). Here Hccl records are matched by name like the other
named kinds, which is what the documented format promises.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

from msmonitor_contract.activity import MEMORY_KINDS, Kind

# msptiActivityFlag values whose host records carry the marker's name.
FLAGS_WITH_NAME = frozenset({1, 2, 8, 16})  # INSTANTANEOUS, START, and their _WITH_DEVICE variants
SOURCE_HOST = 0


def _split(text: str, sep: str) -> List[str]:
    """msMonitor's ``split``: drop empty tokens, trim spaces."""
    return [token.strip(" ") for token in text.split(sep) if token and token.strip(" ")]


class Filter:
    """A parsed filter; immutable. ``Filter.parse("")`` keeps everything."""

    __slots__ = ("_items", "text")

    def __init__(self, items: Mapping[Kind, Tuple[str, ...]], text: str = "") -> None:
        self._items: Dict[Kind, Tuple[str, ...]] = dict(items)
        self.text = text

    @classmethod
    def parse(cls, text: str) -> Filter:
        items: Dict[Kind, Tuple[str, ...]] = {}
        for item in _split(text, ";"):
            parts = _split(item, ":")
            if len(parts) != 2:
                continue
            try:
                kind = Kind.parse(parts[0])
            except ValueError:
                continue
            items[kind] = items.get(kind, ()) + tuple(_split(parts[1], ","))
        return cls(items, text)

    @property
    def active(self) -> bool:
        return bool(self._items)

    def applies_to(self, kind: Kind) -> bool:
        """Whether records of *kind* are subject to name matching (or dropped) at all."""
        return bool(self._items) and kind not in MEMORY_KINDS

    def keeps(self, kind: Kind, name: Optional[str]) -> bool:
        """Whether a record of *kind* named *name* (None: no name) passes."""
        if not self.applies_to(kind):
            return True
        subs = self._items.get(kind)
        if subs is None or not name:
            return False
        return any(sub in name for sub in subs)

    def keeps_marker(self, source: int, flag: int, name: Optional[str]) -> bool:
        """The marker rule: only named host records are matched."""
        if not self.applies_to(Kind.MARKER):
            return True
        if source != SOURCE_HOST or flag not in FLAGS_WITH_NAME:
            return True
        return self.keeps(Kind.MARKER, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Filter) and self._items == other._items

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items.items())))

    def __repr__(self) -> str:
        return f"Filter({self.text!r})"


KEEP_ALL = Filter({})
