"""Finding a recording's databases under a prof_dir, and refusing those still being written.

MindIE 26.0 and this plugin write ``<prof_dir>/<MMDD-HHMM>/Trace_Service/ms_service_<host>-<pid>.db``;
MindIE 8.3 wrote the same name without ``Trace_Service/``. Every ``ms_service_*.db`` below the root is one
(as MindIE's analyser finds them), and ``ascend_service_profiler_*.db`` beside one holds its operators.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Tuple

from msmonitor_contract.numbers import strict_int
from msmonitor_contract.service_tables import OPERATOR_PREFIX, SERVICE_PREFIX, TRACE_DIR

from .model import Process

# The analyser's pattern (data_source/db_data_source.py): ms_service_ then host-pid.
_SERVICE_NAME = re.compile(rf"^{SERVICE_PREFIX}[\w.-]+\.db$")
_OPERATOR_NAME = re.compile(rf"^{OPERATOR_PREFIX}[\w.-]+\.db$")
# struct flock on 64-bit Linux: l_type, l_whence, l_start, l_len, l_pid (padded to 32 bytes).
_FLOCK = struct.Struct("hhqqi4x")


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
    """Every service and operator database under *root* (every dated folder, with or without
    ``Trace_Service/``, every process; *root* may be one of those folders), sorted."""

    def found(pattern: re.Pattern) -> Tuple[Path, ...]:
        paths = (p for p in root.rglob("*.db") if pattern.match(p.name) and p.is_file())
        return tuple(sorted(paths))

    return Inputs(found(_SERVICE_NAME), found(_OPERATOR_NAME))


def locked_by_another(path: Path) -> bool:
    """Another process holds a lock on *path*: SQLite's connections to a database in WAL mode hold one on
    its ``-shm`` file for as long as they are open, and a process that exited holds none."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        l_type = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, query))[0]
        return l_type != fcntl.F_UNLCK
    except OSError:
        return False
    finally:
        os.close(fd)


def still_written(path: Path) -> bool:
    """The database is open in a writer (a connection holds its ``-shm``); ``-wal`` and ``-shm`` files
    that a reader or a dead process left behind do not count."""
    wal, shm = path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")
    return wal.exists() and locked_by_another(shm)


def check_finished(paths: Iterable[Path]) -> None:
    for path in paths:
        if still_written(path):
            raise ExportError(
                f'{path}: still being written (a process has it open): set "enable": 0 and export once'
                " recording stopped"
            )


def process_from_name(path: Path, prefix: str) -> Process:
    """``<prefix><host>-<pid>.db`` as its process (a host may contain dashes; the pid is the last part)."""
    host, _, last = path.stem[len(prefix) :].rpartition("-")
    pid = strict_int(last)
    return Process(host, pid) if host and pid is not None else Process(path.stem[len(prefix) :], 0)


__all__ = [
    "OPERATOR_PREFIX",
    "SERVICE_PREFIX",
    "TRACE_DIR",
    "ExportError",
    "Inputs",
    "check_finished",
    "find_inputs",
    "process_from_name",
    "still_written",
]
