"""The plugin's state in one process: the step counter, the daemon link and the framework hooks."""

from __future__ import annotations

import atexit
import logging
import os
from typing import Mapping, Optional

from . import torch_hook
from .link import DaemonLink
from .steps import StepCounter

log = logging.getLogger("msmonitor_plugin")

# What this plugin can do; the daemon uses it to decide how to reach the process.
CAPABILITIES = ["push"]


class Agent:
    def __init__(self, counter: StepCounter, socket_dir: str) -> None:
        self.counter = counter
        self.owner_pid = os.getpid()
        self.link = DaemonLink(socket_dir, lambda: counter.count, CAPABILITIES)

    def start(self) -> None:
        self.link.start()
        torch_hook.install(self.counter)

    def stop(self) -> None:
        if os.getpid() == self.owner_pid:  # a forked child inherits atexit, not the socket
            self.link.stop()


def socket_dir(env: Mapping[str, str]) -> str:
    """Pathname sockets under this directory instead of abstract names (same variable as Kineto)."""
    return env.get("KINETO_IPC_SOCKET_DIR", "")


def configure_logging(env: Mapping[str, str]) -> None:
    """Log to a file only when asked: the plugin must not write into the training job's output."""
    log.addHandler(logging.NullHandler())
    log_dir = env.get("MSMONITOR_LOG_PATH", "")
    if log_dir:
        try:
            os.makedirs(log_dir, exist_ok=True)
            handler = logging.FileHandler(os.path.join(log_dir, f"msmonitor_plugin_{os.getpid()}.log"))
        except OSError:
            return
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def start_agent(counter: StepCounter, env: Mapping[str, str]) -> Optional[Agent]:
    """Start the agent; on any failure log it and return None — the process runs on unmonitored."""
    configure_logging(env)
    try:
        agent = Agent(counter, socket_dir(env))
        agent.start()
    except Exception:
        log.exception("msmonitor plugin could not start; the process continues without it")
        return None
    atexit.register(agent.stop)
    return agent
