"""msmonitor_plugin: the in-process agent of msMonitor.

``MSMONITOR_USE_DAEMON=1`` activates it (through an installed ``.pth`` hook) in each process that imports
a framework — torch, torch_npu, MindSpore — when that import finishes; ``init()`` registers any process.
``step()`` marks a step boundary in loops that have no ``torch.optim`` optimizer (custom loops,
inference). Nothing here ever raises into the caller.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Optional

from msmonitor_contract import __version__

from .steps import StepCounter

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["__version__", "current_step", "init", "is_active", "shutdown", "step"]

_counter = StepCounter()
_agent: Optional[Agent] = None
_lock = threading.Lock()

#: Mark a step boundary. The hot path: an increment and one attribute check when nothing is pending.
step = _counter.step


def init() -> bool:
    """Register this process with the node's dynolog daemon; idempotent. True when the agent runs."""
    global _agent
    with _lock:
        if _agent is None:
            # Imported here: the daemon and dyno import this package for its wire module, and must not
            # pay for the agent, the tracer and the monitor.
            from .agent import start_agent

            _agent = start_agent(_counter, os.environ)
        return _agent is not None


def shutdown() -> None:
    """Leave the daemon now (also done at interpreter exit)."""
    global _agent
    with _lock:
        if _agent is not None:
            _agent.stop()
            _agent = None


def is_active() -> bool:
    return _agent is not None


def running_agent() -> Optional[Agent]:
    """The running agent, for the plugin's other command sources (``IPCMonitor``).

    Not named ``agent``: importing the submodule ``msmonitor_plugin.agent`` rebinds that name."""
    return _agent


def current_step() -> int:
    return _counter.count


def _forget_after_fork() -> None:
    # A forked child (a DataLoader worker, say) is not the registered process: it must not heartbeat
    # in the parent's name, and the parent's socket is not its to close.
    global _agent, _lock
    _agent = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
