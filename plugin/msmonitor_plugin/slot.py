"""One profiler per process: MSPTI has a single subscriber, and torch.profiler runs one session at a time.

npu-monitor, a ``dyno dynamic`` window and the service profiler's operator collection each claim the
slot before they start one; a second is refused with the name of the first, never left to fail inside
the library (MSPTI would lose data silently).
"""

from __future__ import annotations

import threading
from typing import Optional


class ProfilerSlot:
    def __init__(self) -> None:
        self._holder: Optional[str] = None
        self._lock = threading.Lock()

    def claim(self, who: str) -> Optional[str]:
        """None when *who* holds the slot now (or already did); else who holds it."""
        with self._lock:
            if self._holder is not None and self._holder != who:
                return self._holder
            self._holder = who
            return None

    def release(self, who: str) -> None:
        with self._lock:
            if self._holder == who:
                self._holder = None

    @property
    def holder(self) -> Optional[str]:
        return self._holder
