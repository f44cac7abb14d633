"""Every connection the port holds, by how far it has come, with the bounds an unauthenticated sender
meets.

A sender without a certificate can make the daemon hold connections that have not said what they
speak (*waiting*: a descriptor each), and connections relayed to gRPC whose TLS handshake is not
finished (three descriptors each, the client's, the relay's and gRPC's, and gRPC's handshake state):
silent since their ClientHello (*hello*), or answering the server's first flight (*finishing*). Each
stage has a cap per source and a cap in all, and a deadline; a new connection over a cap closes the
oldest of its stage (of its source, or of all), and the sweep closes those past their deadline. An
honest client speaks at once and answers the server's flight within a round trip, so it is never the
oldest of its stage: a flood, even one that opens and drops connections as fast as it can, closes its
own connections, not the clients it is mixed with. Connections past the handshake (*served*: a
verified certificate, or a plaintext daemon's clients) are never closed for another; all stages
together stay within the port's share of the open files limit (:func:`connection_budget`), and a new
connection beyond it is closed at once.

A source is a sender as :mod:`.sources` tells them apart: a local user, or a remote address. A new
connection over the cap of all closes the oldest of the source holding the most, so a flood from one
source closes its own connections even when the cap of all is what it reached.
"""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass, field
from typing import Callable, Dict, Mapping, Optional, OrderedDict

from ...core import descriptors

DESCRIPTORS_PER_CONNECTION = 3  # a relayed one: the client's, the relay's, gRPC's


class Stage(enum.Enum):
    WAITING = "waiting for their first bytes"
    HELLO = "silent since their TLS ClientHello"
    FINISHING = "finishing their TLS handshake"
    SERVED = "served"


UNSERVED = (Stage.WAITING, Stage.HELLO, Stage.FINISHING)  # the order the budget closes them in


@dataclass(frozen=True)
class Bound:
    per_source: int
    total: int
    timeout_s: float


@dataclass(eq=False)
class Entry:
    source: str
    stage: Optional[Stage]  # None once it left
    deadline: float
    close: Callable[[], object]  # closes the connection


def connection_budget() -> int:
    """How many connections the port may hold at once: its share of the open files limit."""
    return max(64, descriptors.share() // DESCRIPTORS_PER_CONNECTION)


@dataclass
class _Kind:
    bound: Optional[Bound]  # None: no cap but the budget, no deadline
    entries: OrderedDict[int, Entry] = field(default_factory=collections.OrderedDict)  # oldest first
    by_source: Dict[str, OrderedDict[int, Entry]] = field(default_factory=dict)


@dataclass
class Closed:
    """Connections closed for a bound since the last :meth:`Census.closed`: per stage, why."""

    over_cap: Dict[Stage, int] = field(default_factory=lambda: collections.defaultdict(int))
    timed_out: Dict[Stage, int] = field(default_factory=lambda: collections.defaultdict(int))
    for_budget: Dict[Stage, int] = field(default_factory=lambda: collections.defaultdict(int))
    refused: int = 0  # new ones closed at once: the budget was all served connections

    def any(self) -> bool:
        return bool(self.refused or any({**self.over_cap, **self.timed_out, **self.for_budget}.values()))


class Census:
    """Used from the event loop only; *clock* gives deadlines their time."""

    def __init__(self, bounds: Mapping[Stage, Bound], budget: int, clock: Callable[[], float]) -> None:
        """*bounds* for every stage but :attr:`Stage.SERVED`."""
        self._kinds = {stage: _Kind(bounds.get(stage)) for stage in Stage}
        self.budget = budget
        self._clock = clock
        self._count = 0
        self.admitted = 0  # connections ever admitted
        self.peak = 0  # the most held at once since :meth:`reset_peak`
        self._closed = Closed()

    def __len__(self) -> int:
        return self._count

    def held(self, stage: Stage) -> int:
        return len(self._kinds[stage].entries)

    def admit(self, stage: Stage, source: str, close: Callable[[], object]) -> Optional[Entry]:
        """A new connection from *source* in *stage*, older ones closed to make room; None when there is
        none to make (the budget is all served connections): the caller closes it."""
        if self._count >= self.budget and not self._close_oldest_unserved():
            self._closed.refused += 1
            return None
        entry = Entry(source, None, 0.0, close)
        self._enter(entry, stage)
        self._count += 1
        self.admitted += 1
        self.peak = max(self.peak, self._count)
        return entry

    def advance(self, entry: Entry, stage: Stage) -> None:
        """*entry* has come as far as *stage* (its new deadline, and caps, are that stage's)."""
        if entry.stage is not None:
            self._remove(entry)
            self._enter(entry, stage)

    def leave(self, entry: Entry) -> None:
        """*entry* is closed (by itself or for a bound): forgotten. Twice is harmless."""
        if entry.stage is not None:
            self._remove(entry)
            entry.stage = None
            self._count -= 1

    def sweep(self) -> None:
        """Closes the connections past their stage's deadline."""
        now = self._clock()
        for stage, kind in self._kinds.items():
            if kind.bound is None:
                continue
            while kind.entries:
                oldest = next(iter(kind.entries.values()))  # every entry of a stage has its timeout
                if oldest.deadline > now:
                    break
                self._closed.timed_out[stage] += 1
                self._close(oldest)

    def closed_any(self) -> bool:
        return self._closed.any()

    def closed(self) -> Closed:
        """What was closed for a bound since the last call."""
        closed, self._closed = self._closed, Closed()
        return closed

    def reset_peak(self) -> None:
        self.peak = self._count

    def _enter(self, entry: Entry, stage: Stage) -> None:
        kind = self._kinds[stage]
        bound = kind.bound
        same_source = kind.by_source.get(entry.source)
        if bound is not None:
            if same_source is not None and len(same_source) >= bound.per_source:
                self._over_cap(stage, next(iter(same_source.values())))
            if len(kind.entries) >= bound.total:
                largest = max(kind.by_source.values(), key=len)
                self._over_cap(stage, next(iter(largest.values())))
        entry.stage = stage
        entry.deadline = self._clock() + bound.timeout_s if bound is not None else float("inf")
        kind.entries[id(entry)] = entry
        kind.by_source.setdefault(entry.source, collections.OrderedDict())[id(entry)] = entry

    def _remove(self, entry: Entry) -> None:
        assert entry.stage is not None
        kind = self._kinds[entry.stage]
        del kind.entries[id(entry)]
        same_source = kind.by_source[entry.source]
        del same_source[id(entry)]
        if not same_source:
            del kind.by_source[entry.source]

    def _over_cap(self, stage: Stage, oldest: Entry) -> None:
        self._closed.over_cap[stage] += 1
        self._close(oldest)

    def _close_oldest_unserved(self) -> bool:
        for stage in UNSERVED:
            oldest = next(iter(self._kinds[stage].entries.values()), None)
            if oldest is not None:
                self._closed.for_budget[stage] += 1
                self._close(oldest)
                return True
        return False

    def _close(self, entry: Entry) -> None:
        self.leave(entry)
        entry.close()
