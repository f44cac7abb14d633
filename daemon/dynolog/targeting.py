"""Which registered processes a command's targets select."""

from __future__ import annotations

from typing import Iterable, List, Sequence

from .model import Targets
from .registry import ProcessRecord


def matches(record: ProcessRecord, targets: Targets) -> bool:
    if targets.job_id and record.job_id != targets.job_id:
        return False
    # A pid selects the process itself (by its host or in-container pid) or any of its descendants,
    # so a launcher's pid selects all of its workers.
    if targets.pids and targets.pid_set.isdisjoint(record.pid_chain()):
        return False
    return not targets.ranks or record.rank in targets.rank_set


def select(records: Iterable[ProcessRecord], targets: Targets) -> List[ProcessRecord]:
    """Matching processes in rank order (then pid), so a --process-limit keeps the lowest ranks."""
    matched = [r for r in records if matches(r, targets)]
    matched.sort(key=lambda r: (r.rank if r.rank >= 0 else 1 << 30, r.host_pid))
    return matched


# Numbers of a list an answer names; the rest are counted (a long list would not fit in an answer).
SHOWN = 8


def describe(targets: Targets) -> str:
    """The targets in words, for an answer that says none matched."""
    parts = []
    if targets.job_id:
        parts.append(f"job {targets.job_id}")
    if targets.pids:
        parts.append(f"pids {_listed(targets.pids)}")
    if targets.ranks:
        parts.append(f"ranks {_listed(targets.ranks)}")
    return " and ".join(parts) or "the command"


def _listed(numbers: Sequence[int]) -> str:
    shown = ",".join(map(str, numbers[:SHOWN]))
    return shown if len(numbers) <= SHOWN else f"{shown} and {len(numbers) - SHOWN} more"
