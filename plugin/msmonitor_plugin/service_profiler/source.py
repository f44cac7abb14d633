"""The switch file as one more command source of the agent: watched, and each edit routed to the
switch through the agent's router (kind ``service``)."""

from __future__ import annotations

from typing import Mapping

from msmonitor_contract.vocabulary import CommandKind

from ..router import CommandRouter
from ..slot import ProfilerSlot
from . import config
from .switch import ServiceSwitch
from .watch import FileWatch


class ServiceSource:
    def __init__(self, path: str, env: Mapping[str, str], slot: ProfilerSlot, router: CommandRouter) -> None:
        config.ensure(path, env)
        self.switch = ServiceSwitch(path, env, slot)
        self._router = router
        router.register((CommandKind.SERVICE_PROFILER,), self.switch.handle)
        self._watch = FileWatch(path, self._route)

    @property
    def watch_mode(self) -> str:
        """inotify, or poll where the kernel or filesystem has none."""
        return self._watch.mode

    def start(self) -> None:
        self._watch.start()
        self._route()  # "enable": 1 at start-up starts at once

    def stop(self) -> None:
        self._watch.stop()
        self.switch.close()

    def _route(self) -> None:
        self._router.route(self.switch.command())
