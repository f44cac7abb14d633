"""What the daemon had to drop, by where, so that nothing is lost unseen: counted here, logged at most
once a minute per place, shown by ``dyno status`` and exported to Prometheus
(``dynolog_dropped_total{where=...}``).

Places: ``sink_queue`` (a report the sinks were too slow to take: the oldest waiting is dropped),
``watch_queue`` (a report a ``WatchMetrics`` client did not read in time), ``partial_reports`` (a report
whose chunks never all arrived), ``sink_error:<Sink>`` (a report a sink failed to write).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List

log = logging.getLogger("dynolog.core.drops")

LOG_EVERY_S = 60.0


class Drops:
    def __init__(self) -> None:
        self._counts: Dict[str, int] = {}
        self._logged: Dict[str, float] = {}
        self._lock = threading.Lock()  # the sink thread and the event loop both count
        self._sources: List[Callable[[], Dict[str, int]]] = []

    def add(self, where: str, n: int = 1) -> None:
        now = time.monotonic()
        with self._lock:
            total = self._counts[where] = self._counts.get(where, 0) + n
            due = now - self._logged.get(where, -LOG_EVERY_S) >= LOG_EVERY_S
            if due:
                self._logged[where] = now
        if due:
            log.warning("dropped %d in all at %s (logged at most once a minute)", total, where)

    def source(self, counts: Callable[[], Dict[str, int]]) -> None:
        """Counts kept elsewhere (a sink's errors, reassembly), read at each snapshot."""
        self._sources.append(counts)

    def snapshot(self) -> Dict[str, int]:
        with self._lock:
            counts = dict(self._counts)
        for source in self._sources:
            for where, n in source().items():
                counts[where] = counts.get(where, 0) + n
        return counts
