"""One profiler per process: MSPTI has a single subscriber, and torch.profiler runs one session at a time.

Every recorder claims the slot before it starts one: an nputrace or gputrace trace and a ``dyno dynamic``
window when the plugin accepts it (so from ready to finished or failed), npu-monitor while it runs, and
the service profiler's operator collection. A second is refused with the name of the first, never left
to fail inside the library (MSPTI would lose data silently). The holder's name is what the hello reports
as ``profiler``, and what a refusal quotes: "nputrace <id>", "gputrace <id>", "a dyno dynamic window",
"npu-monitor", "the service profiler's operator collection (acl_task_time <mode>)".
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
        """Who holds the slot now; None when it is free."""
        return self._holder
