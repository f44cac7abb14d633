"""A ``dyno dynamic`` window's directory, named as msprof names its own: ``PROF_<seq>_<time>_<tag>/``,
and the ``info.json`` that says what is inside it."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import socket
import string
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List

from msmonitor_contract.vocabulary import timestamp

INFO_FILE = "info.json"
_TAG_ALPHABET = string.ascii_uppercase + string.digits
_sequence = itertools.count(1)  # per process, as msprof's: one more for every window


def directory_name(now_ms: int) -> str:
    """``PROF_000001_20261130154501123_K3Q9ZT2AB8D1XW7M``: the window's number in this process, the local
    time it started, and a random tag so that processes writing under one root never collide."""
    tag = "".join(secrets.choice(_TAG_ALPHABET) for _ in range(16))
    return f"PROF_{next(_sequence):06d}_{timestamp(now_ms)}_{tag}"


@dataclass
class WindowInfo:
    """``info.json``: where the window ran, which steps and times it covers, and how it was asked for."""

    trace_id: str
    backend: str
    rank: int
    start_time: float  # seconds since the epoch
    stop_time: float
    first_step: int  # -1: the process counts no steps
    last_step: int
    complete: bool  # False: the process exited while collecting; what was recorded until then
    options: Dict[str, object]
    warnings: List[str] = field(default_factory=list)
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)


def info_text(info: WindowInfo) -> str:
    return json.dumps(asdict(info), indent=2)


def size_of(files: List[str]) -> int:
    """Bytes in *files*, counting every file under those that are directories (torch_npu's layout)."""
    total = 0
    for path in files:
        if os.path.isdir(path):
            total += sum(
                os.path.getsize(os.path.join(root, name))
                for root, _, names in os.walk(path)
                for name in names
            )
        elif os.path.exists(path):
            total += os.path.getsize(path)
    return total


def now_ms() -> int:
    return int(time.time() * 1000)
