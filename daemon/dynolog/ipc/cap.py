"""How many processes may be registered at once (``--max-ipc-clients``).

Every registration is a record, a pidfd while they last (pidwatch.budget) and work on every sweep and
listing; any process of an allowed uid can fork thousands of children that each register. Past the cap
a new process is refused: no ``mm.ack`` and no reply to its ``req`` or ``ctxt`` (the protocol has no
refusal message, and stock Kineto would not read one), so it retries with its next heartbeat or poll
and registers once another has left. Processes already registered are never refused.
"""

from __future__ import annotations

import logging
from typing import Dict

from ..core.logs import Once
from .endpoint import Sender

log = logging.getLogger("dynolog.ipc.endpoint")

DEFAULT_MAX_CLIENTS = 4096
FLAG = "--max-ipc-clients"


class RegistrationCap:
    def __init__(self, most: int) -> None:
        self.most = most
        self.refused = 0  # registrations refused since the daemon started
        # One line a minute per uid (the uids are the allowed ones: few), with the count since the last.
        self._told = Once()
        self._since_told: Dict[int, int] = {}

    def admits(self, sender: Sender, registered: int) -> bool:
        """Whether *sender*, not registered yet, may be, with *registered* processes registered now."""
        if registered < self.most:
            return True
        self.refused += 1
        self._since_told[sender.uid] = self._since_told.get(sender.uid, 0) + 1
        if self._told(sender.uid):
            log.warning(
                "refused to register process %d (uid %d): %d processes are registered, the most %s "
                "allows (%d); it is registered once another leaves (%d refused from uid %d since the "
                "last such line, this one included)",
                sender.pid, sender.uid, registered, FLAG, self.most,
                self._since_told.pop(sender.uid), sender.uid,
            )  # fmt: skip
        return False
