"""The daemon's own log: a rotating file (logrotate-free), and stderr when it is a terminal."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from .paths import writable_folder

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(log_file: Path, level: str) -> Path:
    """Set up logging; returns the file actually used. Raises OSError naming the file if it is unusable."""
    writable_folder(log_file.parent)
    handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=10 * 1024 * 1024, backupCount=5)
    handler.setFormatter(logging.Formatter(_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    if sys.stderr.isatty():
        console = logging.StreamHandler()
        console.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(console)
    root.setLevel(level)
    logging.getLogger("grpc").setLevel(logging.WARNING)
    return log_file


def shutdown() -> None:
    logging.shutdown()
