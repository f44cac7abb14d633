"""How many processes may be registered at once (``--max-ipc-clients``), in all and per uid.

Every registration is a record, a pidfd while they last (descriptors.share) and work on every sweep and
listing; any process of an allowed uid can fork thousands of children that each register. Past the cap
a new process is refused: no ``mm.ack`` and no reply to its ``req`` or ``ctxt`` (the protocol has no
refusal message, and stock Kineto would not read one), so it retries with its next heartbeat or poll
and registers once another has left. Processes already registered are never refused.

With more than one uid allowed (``--ipc-allowed-uids``), each uid may also hold no more than its share,
half of the cap (rounded up): one uid's fork storm then leaves the other half to the other uids, while
one uid's large job still has half the node's slots (a share of cap / uids would leave a job of one uid
among ten a tenth). Two uids storming together can still fill it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Dict

from ..core.logs import Once

if TYPE_CHECKING:
    from .endpoint import Sender

log = logging.getLogger("dynolog.ipc.endpoint")

DEFAULT_MAX_CLIENTS = 4096
FLAG = "--max-ipc-clients"


def share_of(most: int, uids: int) -> int:
    """What one uid may hold of *most* registrations when *uids* uids are allowed: all of it for one uid,
    else half of it, rounded up (at least 1 where *most* is)."""
    return most if uids <= 1 else (most + 1) // 2


class RegistrationCap:
    def __init__(self, most: int, uids: int = 1) -> None:
        self.most = most
        self.uids = uids  # how many uids are allowed
        self.share = share_of(most, uids)
        self.refused = 0  # registrations refused since the daemon started
        # One line a minute per uid (the uids are the allowed ones: few), with the count since the last.
        self._told = Once()
        self._since_told: Dict[int, int] = {}

    def admits(self, sender: Sender, registered: int, of_uid: int) -> bool:
        """Whether *sender*, not registered yet, may be, with *registered* processes registered now,
        *of_uid* of them by the sender's uid."""
        if registered < self.most and of_uid < self.share:
            return True
        self.refused += 1
        self._since_told[sender.uid] = self._since_told.get(sender.uid, 0) + 1
        if self._told(sender.uid):
            if registered >= self.most:
                why = f"{registered} processes are registered, the most {FLAG} allows ({self.most})"
                until = "another leaves"
            else:
                why = (
                    f"uid {sender.uid} has {of_uid} processes registered, its share of {FLAG} "
                    f"({self.most}) with {self.uids} uids allowed (half: {self.share})"
                )
                until = f"one of uid {sender.uid}'s leaves"
            log.warning(
                "refused to register process %d (uid %d): %s; it is registered once %s (%d refused "
                "from uid %d since the last such line, this one included)",
                sender.pid, sender.uid, why, until, self._since_told.pop(sender.uid), sender.uid,
            )  # fmt: skip
        return False
