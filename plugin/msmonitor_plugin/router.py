"""Commands to this process, routed by kind to the one handler of each kind.

Every command source — the daemon's pushes, and whatever registers later (a config-file watcher, an
interactive session) — feeds the same router, so one process never runs a profiler or a monitor twice.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Iterable, List

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import CommandKind

log = logging.getLogger("msmonitor_plugin")

Handler = Callable[[wire.Command], None]


class CommandRouter:
    def __init__(self) -> None:
        self._handlers: Dict[CommandKind, Handler] = {}

    def register(self, kinds: Iterable[CommandKind], handler: Handler) -> None:
        for kind in kinds:
            self._handlers[kind] = handler

    @property
    def kinds(self) -> List[CommandKind]:
        return list(self._handlers)

    def route(self, command: wire.Command) -> None:
        try:
            handler = self._handlers[CommandKind(command.kind)]
        except (ValueError, KeyError):
            log.warning("ignoring a command of kind %r: nothing here runs it", command.kind)
            return
        handler(command)
