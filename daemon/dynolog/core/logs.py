"""The daemon's own log: a rotating file (logrotate-free), and stderr when it is a terminal or when
``--logtostderr`` asks (a container's log, journald)."""

from __future__ import annotations

import logging
import logging.handlers
import sys
import time
from pathlib import Path
from typing import Dict, Hashable

from .paths import writable_folder

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(log_file: Path, level: str, to_stderr: bool = False) -> bool:
    """Set up logging; returns whether it goes to stderr too. Raises OSError naming the file if it is
    unusable."""
    writable_folder(log_file.parent)
    handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=10 * 1024 * 1024, backupCount=5)
    handler.setFormatter(logging.Formatter(_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    to_stderr = to_stderr or sys.stderr.isatty()
    if to_stderr:
        console = logging.StreamHandler()
        console.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(console)
    root.setLevel(level)
    logging.getLogger("grpc").setLevel(logging.WARNING)
    return to_stderr


def shutdown() -> None:
    logging.shutdown()


class Once:
    """Whether a line is new: the same key is said at most once per *period_s*. What a client can make
    the daemon log over and over (a refusal, a malformed request) goes through one, so a client retrying
    or flooding cannot fill the log; bounded, as the keys come from clients."""

    def __init__(self, period_s: float = 60.0, keys: int = 4096) -> None:
        self._period_s = period_s
        self._keys = keys
        self._said: Dict[Hashable, float] = {}

    def __call__(self, key: Hashable) -> bool:
        now = time.monotonic()
        if now - self._said.get(key, -self._period_s) < self._period_s:
            return False
        if len(self._said) >= self._keys:
            self._said = {k: t for k, t in self._said.items() if now - t < self._period_s}
            if len(self._said) >= self._keys:
                return False
        self._said[key] = now
        return True
