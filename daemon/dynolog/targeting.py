"""Which registered processes a command's targets select."""

from __future__ import annotations

from typing import Iterable, List

from dynoproto import dynolog_pb2 as pb

from .registry import ProcessRecord


def matches(record: ProcessRecord, targets: pb.Targets) -> bool:
    if targets.job_id and record.job_id != targets.job_id:
        return False
    # A pid selects the process itself (by its host or in-container pid) or any of its descendants,
    # so a launcher's pid selects all of its workers.
    if targets.pids and not set(targets.pids) & set(record.pid_chain()):
        return False
    return not targets.ranks or record.rank in targets.ranks


def select(records: Iterable[ProcessRecord], targets: pb.Targets) -> List[ProcessRecord]:
    """Matching processes in rank order (then pid), so a --process-limit keeps the lowest ranks."""
    matched = [r for r in records if matches(r, targets)]
    matched.sort(key=lambda r: (r.rank if r.rank >= 0 else 1 << 30, r.host_pid))
    return matched


def describe(targets: pb.Targets) -> str:
    """The targets in words, for an answer that says none matched."""
    parts = []
    if targets.job_id:
        parts.append(f"job {targets.job_id}")
    if targets.pids:
        parts.append(f"pids {','.join(map(str, targets.pids))}")
    if targets.ranks:
        parts.append(f"ranks {','.join(map(str, targets.ranks))}")
    return " and ".join(parts) or "the command"
