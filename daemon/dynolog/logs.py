"""The daemon's own log: a rotating file (logrotate-free), and stderr when it is a terminal or when
``--logtostderr`` asks (a container's log, journald)."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

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
