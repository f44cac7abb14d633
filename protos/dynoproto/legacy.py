"""dynolog's and msMonitor's JSON RPC, the wire their ``dyno`` binaries speak (port 1778, before gRPC).

One request per TCP connection (inside TLS for msMonitor's ``--certs-dir``): each way a 4-byte signed
length in the host's byte order, then that many bytes of UTF-8 JSON; the server answers once and
closes. The daemon reads requests with it (``dynolog.edge.legacy``), and ``dyno`` writes them to a C++
daemon that speaks nothing else (``dyno.legacy``); both CLIs' exact bytes are in the tests.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, Sequence

# Native order and a standard 4-byte size: what both C++ daemons and both CLIs memcpy.
LENGTH = struct.Struct("=i")
# msMonitor's daemon refuses a request of 8192 bytes or more; the longest its dyno sends is ~1.5 KiB.
MAX_REQUEST = 8191
# A reply carries a pid per matched process: generous, yet a hostile server cannot make dyno buffer much.
MAX_REPLY = 1 << 20

GET_STATUS = "getStatus"
GET_VERSION = "getVersion"
SET_CONFIG = "setKinetOnDemandRequest"
# This daemon's own: {"fn": "cancelTrace", "trace_id": "..."} cancels a trace, as `dyno trace ID --cancel`.
CANCEL_TRACE = "cancelTrace"
# What the stock daemon assumes when a request names no process_limit.
DEFAULT_PROCESS_LIMIT = 1000

# The stock daemon's trace answer; its dyno unwraps processesMatched, so every trace answer carries it.
MATCHED = "processesMatched"
ACTIVITY_TRIGGERED = "activityProfilersTriggered"
ACTIVITY_BUSY = "activityProfilersBusy"
EVENT_TRIGGERED = "eventProfilersTriggered"
EVENT_BUSY = "eventProfilersBusy"
# msMonitor's addition: did any process take it.
COMMAND_STATUS = "commandStatus"
EFFECTIVE = "effective"
INEFFECTIVE = "ineffective"


class LegacyError(ValueError):
    """A frame or body that is not a request of this wire; the message says what was wrong."""


def frame(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


def length(prefix: bytes) -> int:
    return int(LENGTH.unpack(prefix)[0])


def call(fn: str) -> bytes:
    """A request without arguments, as both CLIs write it (``{"fn":"getStatus"}``)."""
    return json.dumps({"fn": fn}, separators=(",", ":")).encode()


def set_config(config: str, job_id: int, pids: Sequence[int], process_limit: int) -> bytes:
    """``setKinetOnDemandRequest`` as the CLIs lay it out (their fixed key order), but escaped."""
    fields: Dict[str, Any] = {
        "fn": SET_CONFIG,
        "config": config,
        "job_id": job_id,
        "pids": list(pids),
        "process_limit": process_limit,
    }
    return ("\n" + json.dumps(fields, indent=4)).encode()


def reply(fields: Dict[str, Any]) -> bytes:
    """An answer as the C++ daemons dump it: compact, keys sorted."""
    return json.dumps(fields, separators=(",", ":"), sort_keys=True).encode()
