"""The dated folder ``<MMDD-HHMM>`` a service writes into: fixed when the service starts, shared by all
of its processes. The first live process decides and is the "master" (host metrics are sampled there
only); the decision is kept in ``<config>.session`` beside the config, under a lock (``<config>.lock``),
as MindIE keeps it in shared memory named after the config path."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from typing import NamedTuple

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
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        current = _read(session)
        if current is not None and _alive(current["pid"]):
            return Decision(current["folder"], current["pid"] == os.getpid())
        folder = time.strftime("%m%d-%H%M")
        temp = f"{session}.{os.getpid()}.tmp"
        with open(temp, "w") as f:
            json.dump({"pid": os.getpid(), "folder": folder}, f)
        os.replace(temp, session)
        return Decision(folder, True)


def _read(path: str) -> dict | None:
    try:
        with open(path) as f:
            data = json.load(f)
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
