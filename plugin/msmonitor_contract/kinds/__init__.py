"""The command kinds, one declaration each: its request's fields (type, default, bounds, help, flag,
config-text key), the checks that span them, the RPC that sends it and the C++ daemons that take it.
The daemon's request model, its checks, the config text, the legacy wire's text and dyno's options are
all derived from these (:mod:`msmonitor_contract.schema`)."""

from __future__ import annotations

from typing import Dict, Tuple

from ..schema import Kind
from .dynamic import DYNAMIC
from .gputrace import GPUTRACE
from .npumonitor import NPUMONITOR
from .nputrace import NPUTRACE

__all__ = ["BY_COMMAND", "BY_RPC", "DYNAMIC", "GPUTRACE", "KINDS", "NPUMONITOR", "NPUTRACE"]

KINDS: Tuple[Kind, ...] = (NPUTRACE, GPUTRACE, NPUMONITOR, DYNAMIC)
BY_RPC: Dict[str, Kind] = {kind.rpc: kind for kind in KINDS}
BY_COMMAND: Dict[str, Kind] = {kind.command.value: kind for kind in KINDS}
