"""One way to wait for state: whoever changes it calls :meth:`Changed.notify`; whoever waits names the
condition it waits for, and is woken at each change to check it — never by a clock."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Callable, Optional


class Changed:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.version = 0  # changes so far: "changed since I looked" is a different version

    def notify(self) -> None:
        """Wake every waiter; later waits need a later change (each change is a fresh event)."""
        self.version += 1
        self._event.set()
        self._event = asyncio.Event()

    async def until(self, condition: Callable[[], bool], timeout: Optional[float] = None) -> bool:
        """Until *condition* holds (checked now and at each change) or *timeout* seconds pass; whether it
        holds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not condition():
            event = self._event
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)
        return True

    async def since(self, version: int) -> None:
        """Until a change after *version* (what :attr:`version` was when the caller last looked)."""
        await self.until(lambda: self.version != version)
