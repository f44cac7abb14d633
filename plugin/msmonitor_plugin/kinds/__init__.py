"""The trace kinds the plugin runs, one module each, and the one list of them.

A trace kind's module reads its text (whose keys its declaration in :mod:`msmonitor_contract.kinds`
gives) into a TraceSpec, and holds its recorder hooks, named together in its ``KIND``
(:class:`~.base.TraceKind`). The router, the tracer, the recorders and the hello find the trace kinds in
:data:`TRACES`: a new trace kind is a module here, listed there. npu-monitor is not a trace: the monitor
reads its keys (:mod:`..monitor.config`).
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from msmonitor_contract.vocabulary import CommandKind

from . import dynamic, gputrace, nputrace
from .base import TraceKind

__all__ = [
    "BY_COMMAND",
    "FRAMEWORK_TRACES",
    "TRACES",
    "dynamic",
    "find",
    "gputrace",
    "nputrace",
]

# In this order the hello lists them.
TRACES: Tuple[TraceKind, ...] = (nputrace.KIND, gputrace.KIND, dynamic.KIND)
BY_COMMAND: Dict[CommandKind, TraceKind] = {kind.command: kind for kind in TRACES}
# The trace kinds torch_npu's and MindSpore's own dynamic profiler takes through IPCMonitor.
FRAMEWORK_TRACES: Tuple[CommandKind, ...] = tuple(kind.command for kind in TRACES if kind.framework_takes)


def find(name: str) -> Optional[TraceKind]:
    """The trace kind a command names (its ``kind``, as sent); None for any other kind."""
    try:
        return BY_COMMAND.get(CommandKind(name))
    except ValueError:
        return None
