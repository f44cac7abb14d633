"""New connections of one kind, per sender and of all senders together, as token buckets: those over
either are closed at once, before they cost the daemon the work they came to cause. All senders
together may open :data:`ALL_SOURCES` times what one may; past that only a light sender (one that used
less than half its own burst) is let in, so a few heavy senders that empty the shared bucket do not
lock everyone else out."""

from __future__ import annotations

import logging
import time
from typing import Optional

from ...core.logs import Once
from ..limits import Client, ClientLimiter, Limits, TokenBucket
from .doorway import Arrival

log = logging.getLogger("dynolog.edge.port")

ALL_SOURCES = 4  # all senders together may open this many times what one may
LIGHT = 0.5  # a sender with more than this part of its own burst left is let in past the shared bucket


class Gate:
    def __init__(self, limits: Limits, what: str) -> None:
        self._per_source = ClientLimiter(limits)
        self._all = TokenBucket.full(ALL_SOURCES * limits.rate, ALL_SOURCES * limits.burst, time.monotonic())
        self._what = what  # as the refusal says it: 'a TLS connection'
        self._said = Once()

    @classmethod
    def of(cls, limits: Limits, what: str) -> Optional[Gate]:
        """None where *limits* set no rate (0: unlimited)."""
        return cls(limits, what) if limits.rate > 0 else None

    def admit(self, arrival: Arrival) -> bool:
        host, source = arrival.host, arrival.source
        name = f"at {host}" if source == host else f"at {host} ({source})"
        client = Client(f"{self._what}:{source}", name)
        if self._per_source.admit(client, self._what, False) is not None:
            return False  # logged by the limiter, once a minute per sender
        if self._all.take(time.monotonic()) or self._per_source.share_left(client) > LIGHT:
            return True
        if self._said(self._what):
            log.warning(
                "refused %s from %s: all senders together opened more than %g a second, and this one "
                "used half its burst (%s)",
                self._what,
                name,
                self._all.rate,
                self._per_source.limits.flags,
            )
        return False
