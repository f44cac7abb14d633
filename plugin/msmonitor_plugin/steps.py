"""Step counting: the one piece of the plugin on the training thread's hot path."""

from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, Optional

log = logging.getLogger("msmonitor_plugin")

# StepCounter.once: runs an action at the next step boundary; returns its cancel, or None when it cannot.
AtNextStep = Callable[[Callable[[], None]], Optional[Callable[[], None]]]


class StepCounter:
    """Counts step boundaries; step k is the work between the k-th and (k+1)-th boundary.

    With nothing pending, a boundary costs an increment and one attribute check. Work the daemon asks
    for at a given step is installed as :attr:`pending` by the background thread and runs here, on the
    training thread, at the boundary.
    """

    __slots__ = ("__weakref__", "_optimizer", "count", "explicit", "pending")

    def __init__(self) -> None:
        self.count = 0
        self.pending: Optional[Callable[[int], None]] = None
        # Once the program calls step() itself, optimizer hooks stop counting, so no step counts twice.
        self.explicit = False
        self._optimizer: Optional[weakref.ref[Any]] = None

    def once(self, action: Callable[[], None]) -> Optional[Callable[[], None]]:
        """Run *action* at the next boundary, on the training thread; returns what cancels it, or None
        when :attr:`pending` is taken (a trace's: the two never run together)."""
        if self.pending is not None:
            return None

        def boundary(_step: int) -> None:
            cancel()
            try:
                action()
            except Exception:  # on the training thread: whatever the action does, the step goes on
                log.exception("msmonitor: an action at a step boundary failed")

        def cancel() -> None:
            if self.pending is boundary:
                self.pending = None

        self.pending = boundary
        return cancel

    def step(self) -> None:
        self.explicit = True
        self.count += 1
        pending = self.pending  # read once: another thread may clear it meanwhile
        if pending is not None:
            pending(self.count)

    def optimizer_stepped(self, optimizer: Any) -> None:
        """Counts the steps of one optimizer (the first to step, until it is garbage-collected)."""
        if self.explicit:
            return
        tracked = self._optimizer() if self._optimizer is not None else None
        if tracked is None:
            self._optimizer = weakref.ref(optimizer)
        elif tracked is not optimizer:
            return
        self.count += 1
        pending = self.pending  # read once: another thread may clear it meanwhile
        if pending is not None:
            pending(self.count)
