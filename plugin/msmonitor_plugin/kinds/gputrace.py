"""``gputrace`` in the process: its text (declared in :mod:`msmonitor_contract.kinds.gputrace`) as a
TraceSpec. Its trace is one file, named as Kineto names it; torch.profiler records it, even where
torch_npu is imported."""

from __future__ import annotations

import os
from typing import Dict

from msmonitor_contract import vocabulary as v
from msmonitor_contract.configtext import read
from msmonitor_contract.kinds.gputrace import GPUTRACE, kineto_output_file
from msmonitor_contract.vocabulary import CommandKind

from .base import TorchOutput, TraceKind, TraceSpec, at_least, recording_options, time_based

KEYS = GPUTRACE.keys


def parse(trace_id: str, raw: Dict[str, str]) -> TraceSpec:
    values = read(KEYS, raw)
    check = at_least(values, raw)
    spec = TraceSpec(CommandKind.GPUTRACE, trace_id, values["ACTIVITIES_LOG_FILE"], activities=["CPU", "GPU"])
    spec.iterations = check("ACTIVITIES_ITERATIONS", 0)
    if spec.step_based:
        spec.start_step = -1
        spec.start_roundup = max(
            v.DEFAULT_START_ITERATION_ROUNDUP, check("PROFILE_START_ITERATION_ROUNDUP", 0)
        )
    else:
        time_based(spec, check)
    recording_options(spec, values, shapes_key="PROFILE_REPORT_INPUT_SHAPES")
    return spec


def _torch_output(spec: TraceSpec, host: str, pid: int) -> TorchOutput:
    """Where stock Kineto would write it: the trace is that one file."""
    file = kineto_output_file(spec.log_file, pid)
    return TorchOutput(os.path.dirname(file) or ".", file, file)


KIND = TraceKind(
    CommandKind.GPUTRACE,
    KEYS,
    parse,
    _torch_output,
    folder=lambda spec: _torch_output(spec, "", os.getpid()).folder,
)
