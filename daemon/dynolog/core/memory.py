"""Memory a burst of work freed, given back to the system.

glibc's malloc keeps what was freed for reuse, so after a flood of connections (each some tens of KB,
gRPC's buffers included) the daemon's resident size would stay at the flood's peak for good."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from typing import Optional

log = logging.getLogger("dynolog.core.memory")


@functools.lru_cache(maxsize=1)
def _libc() -> Optional[ctypes.CDLL]:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None  # glibc's alone


def give_back() -> None:
    """malloc_trim(0): free pages of every arena returned to the system (nothing where the C library has
    no such call, musl say)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
        log.debug("gave freed memory back to the system")
