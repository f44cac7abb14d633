"""``dynamic``: one ``dyno dynamic`` window, recorded from its start command until its stop command. A
start carries where it goes and what it records (nputrace's options under their keys, msprof's under
MSPROF_); a stop only its action. Both profilers write it into a ``PROF_`` folder of its own, as msprof
names its windows."""

from __future__ import annotations

import os
from typing import Dict

from msmonitor_contract.configtext import ConfigTextError, read
from msmonitor_contract.kinds.dynamic import DYNAMIC, START, STOP
from msmonitor_contract.vocabulary import CommandKind

from ..trace import prof
from .base import TraceKind, TraceSpec, in_folder, recording_options

KEYS = DYNAMIC.keys


def is_stop(raw: Dict[str, str]) -> bool:
    """A window's stop command (its start carries the options)."""
    action = read(KEYS, raw)["DYNAMIC_ACTION"]
    if action not in (START, STOP):
        raise ConfigTextError(f"DYNAMIC_ACTION={action} is not start or stop")
    return bool(action == STOP)


def parse(trace_id: str, raw: Dict[str, str]) -> TraceSpec:
    values = read(KEYS, raw)
    if not values["DYNAMIC_OUTPUT"]:
        raise ConfigTextError("DYNAMIC_OUTPUT is required")
    spec = TraceSpec(
        CommandKind.DYNAMIC,
        trace_id,
        values["DYNAMIC_OUTPUT"],
        activities=values["PROFILE_ACTIVITIES"],
        until_stopped=True,
    )
    recording_options(spec, {**values, "PROFILE_WITH_FLOPS": False}, shapes_key="PROFILE_RECORD_SHAPES")
    spec.analyse = True  # every window has its summary
    spec.msprof = {
        k: raw[k] for k in raw if k.startswith("MSPROF_") and values.get(k) not in (None, "", False, [])
    }
    return spec


def _window_folder(spec: TraceSpec) -> str:
    """The window's ``PROF_`` folder under DYNAMIC_OUTPUT: a new one (and number) at each call."""
    return os.path.join(spec.log_file, prof.directory_name(prof.now_ms()))


KIND = TraceKind(
    CommandKind.DYNAMIC,
    KEYS,
    parse,
    lambda spec, host, pid: in_folder(_window_folder(spec), host, pid),
    ascend_root=_window_folder,
    is_stop=is_stop,
)
