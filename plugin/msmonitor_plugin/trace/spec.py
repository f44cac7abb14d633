"""What a trace command asks for, parsed from its config text into one :class:`TraceSpec` by the module
of its kind (:mod:`msmonitor_plugin.kinds`).

nputrace arrives as msMonitor's keys (the same text torch_npu parses), gputrace as Kineto's, a
``dyno dynamic`` window as the DYNAMIC keys. Each becomes a start (a step, a step multiple, a time, or
the next boundary), a stop (a number of steps, a duration, or a stop command), the recording options,
and where the output goes.
"""

from __future__ import annotations

from msmonitor_contract import configtext, wire
from msmonitor_contract.configtext import ConfigTextError

from .. import kinds
from ..kinds.base import TraceSpec


def parse(command: wire.Command) -> TraceSpec:
    """Raises ConfigTextError naming the key."""
    raw = configtext.parse(command.config)
    kind = kinds.find(command.kind)
    if kind is None:
        raise ConfigTextError(f"unknown trace kind {command.kind!r}")
    return kind.parse(command.trace_id, raw)


def is_stop(command: wire.Command) -> bool:
    """A trace's stop command (a window's stop, or a cancel), not a trace; False for an unknown kind.
    Raises ConfigTextError when the command is neither (a window's that is not start or stop, say)."""
    kind = kinds.find(command.kind)
    return kind is not None and kind.is_stop(configtext.parse(command.config))
