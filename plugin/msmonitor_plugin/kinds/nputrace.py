"""``nputrace`` in the process: its text (declared in :mod:`msmonitor_contract.kinds.nputrace`) as a
TraceSpec. torch_npu's profiler records it where the process has imported torch_npu, else torch.profiler,
into a folder of its own under ACTIVITIES_LOG_FILE."""

from __future__ import annotations

import os
import time
from typing import Dict

from msmonitor_contract.configtext import ConfigTextError, read
from msmonitor_contract.kinds.nputrace import NPUTRACE
from msmonitor_contract.vocabulary import CommandKind, timestamp

from .base import TorchOutput, TraceKind, TraceSpec, at_least, in_folder, recording_options, time_based

KEYS = NPUTRACE.keys


# The PROFILE_ keys the spec holds in fields of its own; every other one goes to torch_npu as text.
_COMMON_KEYS = {
    "PROFILE_START_STEP",
    "PROFILE_START_ITERATION",
    "PROFILE_START_TIME",
    "PROFILE_ACTIVITIES",
    "PROFILE_RECORD_SHAPES",
    "PROFILE_PROFILE_MEMORY",
    "PROFILE_WITH_STACK",
    "PROFILE_WITH_FLOPS",
    "PROFILE_WITH_MODULES",
    "PROFILE_ANALYSE",
}


def parse(trace_id: str, raw: Dict[str, str]) -> TraceSpec:
    values = read(KEYS, raw)
    check = at_least(values, raw)
    if not values["ACTIVITIES_LOG_FILE"]:
        raise ConfigTextError("ACTIVITIES_LOG_FILE is required")
    spec = TraceSpec(CommandKind.NPUTRACE, trace_id, values["ACTIVITIES_LOG_FILE"])
    spec.iterations = check("ACTIVITIES_ITERATIONS", 0)
    if spec.step_based:
        spec.start_step = check("PROFILE_START_STEP", -1)
    else:
        time_based(spec, check)
    spec.activities = values["PROFILE_ACTIVITIES"]
    recording_options(spec, values, shapes_key="PROFILE_RECORD_SHAPES")
    spec.analyse = values["PROFILE_ANALYSE"]
    spec.npu = {k: val for k, val in raw.items() if k.startswith("PROFILE_") and k not in _COMMON_KEYS}
    return spec


def _torch_output(spec: TraceSpec, host: str, pid: int) -> TorchOutput:
    """A folder per trace, named as torch_npu names its own (``_torch`` where it says ``_ascend_pt``)."""
    run = f"{host}_{pid}_{timestamp(int(time.time() * 1000))}_torch"
    return in_folder(os.path.join(spec.log_file, run), host, pid)


KIND = TraceKind(
    CommandKind.NPUTRACE,
    KEYS,
    parse,
    _torch_output,
    ascend_root=lambda spec: spec.log_file,
    framework_takes=True,
)
