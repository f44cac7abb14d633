"""Warnings that others can cause at will, said at most once a period with a count.

A datagram from another local user reaches the plugin's socket (abstract names have no permissions) and
is dropped; logging each drop let any user fill the job's log at tens of thousands of lines a second.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

PERIOD_S = 60.0


class Throttled:
    """One warning, said the first time it happens and then at most once per *period_s*, with how many
    times it happened since it was last said. Called from one thread (the link's)."""

    def __init__(
        self,
        log: logging.Logger,
        message: str,
        period_s: float = PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._message = message
        self._period_s = period_s
        self._clock = clock
        self._count = 0  # since the last line
        self._said_at: Optional[float] = None

    def __call__(self) -> None:
        self._count += 1
        now = self._clock()
        if self._said_at is not None and now - self._said_at < self._period_s:
            return
        self._log.warning(
            "%s: %d since the last such line (said at most once every %g s)",
            self._message,
            self._count,
            self._period_s,
        )
        self._count = 0
        self._said_at = now
