"""A rotating JSONL file of the reports, beside the daemon's log: one line per report.

Each line: ``{"time": ISO-8601, "host", "job", "rank", "pid", "report": <Report.to_dict()>}``. Rotation is
the standard library's ``RotatingFileHandler`` (by size: ``path``, ``path.1`` … ``path.<backups>``).
"""

from __future__ import annotations

import datetime
import json
import logging
import logging.handlers
from pathlib import Path

from msmonitor_contract.report import Report

from . import ProcessLabels

DEFAULT_NAME = "dynolog_metrics.jsonl"


def beside(log_file: Path) -> Path:
    """The metrics file next to the daemon's log file."""
    return log_file.with_name(DEFAULT_NAME)


class _Handler(logging.handlers.RotatingFileHandler):
    def handleError(self, record: logging.LogRecord) -> None:
        # logging's own handleError prints to stderr and carries on: a line that was not written (a
        # full disk) would be lost unseen. Raised, the sinks count it as this sink's error.
        raise  # called from the except block of emit(): re-raises its exception


class JsonlSink:
    def __init__(self, path: Path, max_bytes: int = 10 * 1024 * 1024, backups: int = 5) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handler = _Handler(path, maxBytes=max_bytes, backupCount=backups)
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        # A logger of its own that writes only to this file (not to the daemon's log).
        self._log = logging.Logger(f"dynolog.monitoring.metrics.{id(self)}")
        self._log.addHandler(self._handler)

    def emit(self, process: ProcessLabels, report: Report) -> None:
        line = {
            "time": datetime.datetime.fromtimestamp(report.end_ns / 1e9, datetime.timezone.utc).isoformat(),
            "host": process.host,
            "job": process.job,
            "rank": process.rank,
            "pid": process.pid,
            "report": report.to_dict(),
        }
        self._log.info(json.dumps(line, separators=(",", ":"), ensure_ascii=False))

    def close(self) -> None:
        self._handler.close()
