"""Finding a recording's databases under a prof_dir, and refusing those still being written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Tuple

from msmonitor_plugin.service_profiler.schema import OPERATOR_PREFIX, SERVICE_PREFIX, TRACE_DIR

from .model import Process


class ExportError(Exception):
    """An input that cannot be exported (yet); the message names the file and what to do."""


@dataclass(frozen=True)
class Inputs:
    service: Tuple[Path, ...]
    operator: Tuple[Path, ...]

    @property
    def all(self) -> Tuple[Path, ...]:
        return self.service + self.operator


def find_inputs(root: Path) -> Inputs:
    """Every ``Trace_Service/ms_service_*.db`` and ``ascend_service_profiler_*.db`` under *root* (every
    dated folder, every process; *root* may be a ``Trace_Service`` folder itself), sorted."""

    def found(prefix: str) -> Tuple[Path, ...]:
        paths = (p for p in root.rglob(f"{prefix}*.db") if p.parent.name == TRACE_DIR and p.is_file())
        return tuple(sorted(paths))

    return Inputs(found(SERVICE_PREFIX), found(OPERATOR_PREFIX))


def check_finished(paths: Iterable[Path]) -> None:
    """Refuse a database still being written: in WAL mode SQLite keeps ``<file>-wal`` while a connection
    is open and removes it on a clean close."""
    for path in paths:
        wal = path.with_name(path.name + "-wal")
        if wal.exists():
            raise ExportError(
                f'{path}: still being written (its -wal file exists): set "enable": 0 and export once'
                " recording stopped (or, if its process died, open and close it with sqlite3 to recover)"
            )


def process_from_name(path: Path, prefix: str) -> Process:
    """``<prefix><host>-<pid>.db`` as its process (a host may contain dashes; the pid is the last part)."""
    host, _, pid = path.stem[len(prefix) :].rpartition("-")
    return Process(host, int(pid)) if host and pid.isdigit() else Process(path.stem[len(prefix) :], 0)
