"""The dated folder ``<MMDD-HHMM>`` a service writes into: fixed when the service starts, shared by all
of its processes. The first live process decides and is the "master" (host metrics are sampled there
only); the decision is kept in ``<config>.session`` beside the config, under a lock (``<config>.lock``),
as MindIE keeps it in shared memory named after the config path."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import stat
import time
from pathlib import Path
from typing import IO, NamedTuple

from msmonitor_contract.files import replacing

from .config import read_text

log = logging.getLogger("msmonitor_plugin")


class Decision(NamedTuple):
    folder: str  # MMDD-HHMM
    master: bool  # this process decided it


def decide(config_path: str) -> Decision:
    """The service's folder; where the config's folder is not writable, this process decides alone."""
    try:
        return _decide(config_path)
    except OSError as exc:
        log.warning(
            "service profiler: cannot share the dated folder through %s.session: %s", config_path, exc
        )
        return Decision(time.strftime("%m%d-%H%M"), True)


def _decide(config_path: str) -> Decision:
    session, lock = config_path + ".session", config_path + ".lock"
    with _lock_file(lock) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        current = _read(session)
        if current is not None and _alive(current["pid"]):
            return Decision(current["folder"], current["pid"] == os.getpid())
        folder = time.strftime("%m%d-%H%M")
        with replacing(Path(session)) as temp:
            temp.write_text(json.dumps({"pid": os.getpid(), "folder": folder}))
        return Decision(folder, True)


def _lock_file(path: str) -> IO[bytes]:
    """The lock file, opened without waiting: a FIFO there (no reader) would hang the interpreter's
    start, where the .pth hook runs this; anything but a regular file raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{path} is not a regular file")
    return os.fdopen(fd, "ab")


def _read(path: str) -> dict | None:
    try:
        data = json.loads(read_text(path))
        return data if isinstance(data.get("pid"), int) and isinstance(data.get("folder"), str) else None
    except (OSError, ValueError, AttributeError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
