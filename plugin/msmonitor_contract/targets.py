"""Which processes a command is for: the ``Targets`` every command carries, declared once, and the one
rule by which they select a process (the daemon applies it to its registry, for every command and
listing)."""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Dict, FrozenSet, Iterable, List, Sequence

from . import rules
from .schema import Field, Message
from .values import INT, NUMBERS, pid_list

# More pids than a node runs processes; ranks, as many (nputrace's config text carries them, in one
# datagram of 64 KiB). A set of them is built once per command, so matching costs no more for a long list.
MAX_PIDS = 4096
MAX_RANKS = 4096
# Numbers of a list an answer names; the rest are counted (a long list would not fit in an answer).
SHOWN = 8


class Selecting:
    """What a Targets model can say (its fields come from :data:`TARGETS`); empty fields select all."""

    job_id: int
    pids: Sequence[int]
    ranks: Sequence[int]
    process_limit: int

    if TYPE_CHECKING:  # what the model, a frozen dataclass made from TARGETS, adds
        __dataclass_fields__: ClassVar[Dict[str, Any]]

        def __init__(self, **fields: Any) -> None: ...

    @cached_property
    def pid_set(self) -> FrozenSet[int]:
        """Built once per command, not once per process matched."""
        return frozenset(self.pids)

    @cached_property
    def rank_set(self) -> FrozenSet[int]:
        return frozenset(self.ranks)

    @classmethod
    def of_pid(cls, host_pid: int) -> Any:
        """The targets that select one process."""
        return cls(pids=(host_pid,))

    def selects(self, job_id: int, pid_chain: Iterable[int], rank: int) -> bool:
        """Whether a process is selected. A pid selects the process itself (by its host or in-container
        pid) or any of its descendants (its *pid_chain* holds both, and its ancestors, as the daemon
        reads them from /proc, never as the process claims them), so a launcher's pid selects all of
        its workers."""
        if self.job_id and job_id != self.job_id:
            return False
        if self.pids and self.pid_set.isdisjoint(pid_chain):
            return False
        return not self.ranks or rank in self.rank_set

    def describe(self) -> str:
        """The targets in words, for an answer that says none matched."""
        parts = []
        if self.job_id:
            parts.append(f"job {self.job_id}")
        if self.pids:
            parts.append(f"pids {_listed(self.pids)}")
        if self.ranks:
            parts.append(f"ranks {_listed(self.ranks)}")
        return " and ".join(parts) or "the command"


def _listed(numbers: Sequence[int]) -> str:
    shown = ",".join(map(str, numbers[:SHOWN]))
    return shown if len(numbers) <= SHOWN else f"{shown} and {len(numbers) - SHOWN} more"


TARGETS = Message(
    "Targets",
    (
        Field(
            "job_id",
            INT,
            "only this job's processes (0: every job)",
            default=0,
            check=rules.within(0, float("inf"), ">= 0"),
        ),
        Field(
            "pids",
            NUMBERS,
            "comma-separated pids; a launcher's pid selects its workers",
            default="0",
            parse=pid_list,
            check=rules.numbers(MAX_PIDS, 1, "pids must be positive"),
        ),
        Field(
            "ranks",
            NUMBERS,
            "comma-separated ranks, e.g. 0,1",
            flag="--rank-list",
            check=rules.numbers(MAX_RANKS, 0, "ranks must be >= 0"),
        ),
        Field(
            "process_limit",
            INT,
            "at most this many processes (default 0: every matched one; dynolog's is 3)",
            default=0,
            check=rules.within(0, float("inf"), ">= 0 (0: no limit)"),
        ),
    ),
    base=Selecting,
)
if TYPE_CHECKING:
    Targets = Selecting
else:
    Targets = TARGETS.model


def check(request: Any) -> List[rules.FieldError]:
    """What is wrong with *request*'s targets (a stream's, which has nothing else to check)."""
    return [dataclasses.replace(e, field="targets." + e.field) for e in TARGETS.check(request.targets)]
