"""A legacy request body, read strictly: what the C++ daemons close on without a word is
:class:`LegacyError` here too, and what they answer ``{"status":"failed"}`` is a :class:`Failed`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Union

from dynoproto import legacy
from dynoproto.legacy import LegacyError
from msmonitor_contract.targets import Targets

FUNCTIONS = (legacy.GET_STATUS, legacy.GET_VERSION, legacy.SET_CONFIG, legacy.CANCEL_TRACE)


@dataclass(frozen=True)
class Call:
    fn: str  # getStatus or getVersion


@dataclass(frozen=True)
class SetConfig:
    """``setKinetOnDemandRequest``: config text for the processes *targets* selects."""

    config: str
    targets: Targets


@dataclass(frozen=True)
class CancelTrace:
    """``cancelTrace``: this daemon's own function, for scripts that speak this wire."""

    trace_id: str


@dataclass(frozen=True)
class Failed:
    """A request of a known function with fields the daemon cannot use; answered with *why*."""

    fn: str
    why: str


Request = Union[Call, SetConfig, CancelTrace, Failed]


def parse(body: bytes) -> Request:
    fields = _object(body)
    fn = fields.get("fn")
    if fn not in FUNCTIONS:
        raise LegacyError(f"unknown fn {str(fn)[:64]!r}" if fn is not None else "no fn")
    if fn == legacy.CANCEL_TRACE:
        trace_id = fields.get("trace_id")
        return CancelTrace(trace_id) if isinstance(trace_id, str) else Failed(fn, "trace_id must be a string")
    if fn != legacy.SET_CONFIG:
        return Call(fn)
    try:
        return SetConfig(fields["config"], _targets(fields))
    except KeyError as exc:
        return Failed(fn, f"{exc.args[0]} is missing")
    except (TypeError, ValueError) as exc:
        return Failed(fn, str(exc))


def _object(body: bytes) -> Dict[str, Any]:
    try:
        fields = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise LegacyError("the body is not UTF-8") from None
    except RecursionError:  # json's scanner recurses per level of nesting
        raise LegacyError("the body nests too deep") from None
    except ValueError as exc:
        raise LegacyError(f"the body is not JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise LegacyError("the body is not a JSON object")
    return fields


def _targets(fields: Dict[str, Any]) -> Targets:
    """The stock daemon's reading: pids ``[]`` or ``[0]`` mean every process; job_id 0 every job."""
    if not isinstance(fields["config"], str):
        raise TypeError("config must be a string of KEY=VALUE lines")
    pids = fields["pids"]
    if not isinstance(pids, list) or not all(_is_int(p) for p in pids):
        raise TypeError("pids must be a list of integers")
    job_id = fields.get("job_id", 0)
    limit = fields.get("process_limit", legacy.DEFAULT_PROCESS_LIMIT)
    for name, value in (("job_id", job_id), ("process_limit", limit)):
        if not _is_int(value):
            raise TypeError(f"{name} must be an integer, got {str(value)[:64]!r}")
    return Targets(job_id=job_id, pids=tuple(p for p in pids if p != 0), process_limit=limit)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
