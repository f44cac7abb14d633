"""Waiting for a daemon that is still starting, for scripts that have just started it and their jobs.

``dyno status --wait`` and ``dyno processes --wait-for N`` ask again until the answer is what the script
needs; an unreachable daemon is asked again too (one started a moment ago is not listening yet), any
other failure ends the wait at once.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, TypeVar

from .exits import EXIT_FAILED, EXIT_UNREACHABLE, CliError

BOUND_S = 60.0  # a job's first registration: the interpreter's start and the framework's import
POLL_S = 0.2

T = TypeVar("T")


def until(ask: Callable[[], T], enough: Callable[[T], Optional[str]]) -> T:
    """*ask*'s answer once *enough* has no complaint about it (its complaint: what is still missing)."""
    deadline = time.monotonic() + BOUND_S
    while True:
        try:
            answer = ask()
            missing = enough(answer)
            if missing is None:
                return answer
            code = EXIT_FAILED
        except CliError as exc:
            if exc.exit_code != EXIT_UNREACHABLE:
                raise
            missing, code = str(exc), EXIT_UNREACHABLE
        if time.monotonic() > deadline:
            raise CliError(f"{missing} (waited {BOUND_S:.0f} s)", code)
        time.sleep(POLL_S)
