"""Profiler backends, chosen at run time: torch_npu's profiler on Ascend, else torch.profiler; and the
trace's folder, checked (and opened) when the trace is accepted.

Neither backend imports a framework the process has not imported itself.
"""

from __future__ import annotations

from typing import Sequence

from .. import kinds
from ..identity import imported
from ..kinds.base import TraceSpec
from .npu_recorder import NpuRecorder
from .output import open_output
from .recorder import Recorder, RecorderError, unwritable
from .torch_recorder import TorchRecorder


def output_folder(spec: TraceSpec) -> str:
    """The folder a trace writes into, as its kind says: the log-file folder, or the folder of gputrace's
    file."""
    return kinds.BY_COMMAND[spec.kind].folder(spec)


def check_output(spec: TraceSpec, roots: Sequence[str] = ()) -> None:
    """Raise RecorderError when this process cannot write into the trace's folder, so that the trace
    fails when it is asked for rather than after recording: a read-only file system, a path under a
    regular file, a folder without permission, a link below the daemon's *roots* (its --trace-root).
    The folder is made if missing, as the write would, and kept open on the spec
    (:mod:`.output`): every later write goes through it."""
    folder = output_folder(spec)
    try:
        opened = open_output(folder, roots)
    except OSError as exc:
        raise unwritable(folder, exc) from None
    try:
        opened.probe()
    except OSError as exc:
        opened.close()
        raise unwritable(folder, exc) from None
    spec.folder = opened


def recorder_for(spec: TraceSpec) -> Recorder:
    """torch_npu's profiler where the process imported torch_npu and the kind records there, else
    torch.profiler."""
    if imported("torch_npu") and kinds.BY_COMMAND[spec.kind].ascend_root is not None:
        return NpuRecorder(spec)
    if imported("torch"):
        return TorchRecorder(spec)
    raise RecorderError("this process has not imported torch (or torch_npu): there is no profiler to run")
