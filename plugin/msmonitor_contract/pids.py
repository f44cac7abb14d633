"""A process's pid chain, as its hello carries it and the daemon reads it again from ``/proc``: what
``--pids`` is matched against (a launcher's pid selects its workers)."""

from __future__ import annotations

from typing import List

MAX_ANCESTORS = 10  # as Kineto: the daemon matches --pids against this chain


def ancestors(pid: int) -> List[int]:
    """Parent, grandparent, … up to :data:`MAX_ANCESTORS`, stopping before pid 1 (as Kineto does)."""
    chain: List[int] = []
    current = pid
    while len(chain) < MAX_ANCESTORS:
        parent = _parent_of(current)
        if parent <= 1:
            break
        chain.append(parent)
        current = parent
    return chain


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0
    # The command name may contain spaces and parentheses: the fields start after the last ')'.
    rest = stat[stat.rfind(b")") + 2 :].split()
    return int(rest[1]) if len(rest) > 1 else 0
