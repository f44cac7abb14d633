"""Which registered processes a command's targets select (the rule is the contract's,
:meth:`msmonitor_contract.targets.Selecting.selects`)."""

from __future__ import annotations

from typing import Iterable, List

from msmonitor_contract.targets import Targets

from .registry import ProcessRecord


def matches(record: ProcessRecord, targets: Targets) -> bool:
    return targets.selects(record.job_id, record.pid_chain(), record.rank)


def select(records: Iterable[ProcessRecord], targets: Targets) -> List[ProcessRecord]:
    """Matching processes in rank order (then pid), so a --process-limit keeps the lowest ranks."""
    matched = [r for r in records if matches(r, targets)]
    matched.sort(key=lambda r: (r.rank if r.rank >= 0 else 1 << 30, r.host_pid))
    return matched
