"""The service profiler's switch (issue 11): edit → recording, and the cost of the instrumentation API.

1. Edit → recording: the plugin's switch (its file watcher, the router, the switch opening its store) in
   this process, on a config file in a temporary folder. Each edit writes a new file and renames it over
   the config (as editors and ``sed -i`` do); the figure is the time from the rename until the API records
   (``api._active`` set), or, for ``enable: 0``, until it no longer does. Edits alternate 1 and 0,
   0.2-0.7 s apart (random), so some pairs fall within one second. Beside it, in the same run and on the
   same edits, MindIE's loop reimplemented: every 100 ms ``stat()`` the file, compare ``st_mtime`` in
   whole seconds, and re-read it when that changed; its figure is the time until it read the new
   ``enable``, and the edits it never saw are counted.
2. Disabled cost: ``Profiler(Level.INFO).domain(d).res(r).event(e)`` with the switch off, timed in
   batches of 10 000 (median of batches, per call).
3. Enabled: the same call with the switch on, from one thread, 200 000 events at full speed (the caller's
   cost per event), then paced at 200 000 events/s for 2 s: the store must keep up, nothing dropped
   (rows written = events made).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import threading
import time
from typing import Dict, List, Optional

from _bench import Figure, percentile, report, wait_until
from msmonitor_plugin.router import CommandRouter
from msmonitor_plugin.service_profiler import api
from msmonitor_plugin.service_profiler.api import Level, Profiler
from msmonitor_plugin.service_profiler.source import ServiceSource
from msmonitor_plugin.slot import ProfilerSlot

EDITS = 40
BATCH, BATCHES = 10_000, 50
RATE, PACED_S = 200_000, 2.0


class MindiePoll:
    """MindIE's ``DynamicControl``: stat() every 100 ms, act when st_mtime (seconds) changed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.enable: Optional[int] = None
        self.seen_at: Dict[int, float] = {}  # generation -> when this loop read it
        self._stop = threading.Event()
        self._mtime = -1
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            mtime = int(os.stat(self.path).st_mtime)
            if mtime == self._mtime:
                continue
            self._mtime = mtime
            with open(self.path) as f:
                content = json.load(f)
            self.enable = content["enable"]
            self.seen_at.setdefault(content["generation"], time.monotonic())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def edit(path: str, enable: int, generation: int, prof_dir: str) -> float:
    """When the edit was made: just before the rename (the watcher may run before rename returns)."""
    temp = path + ".tmp"
    with open(temp, "w") as f:
        json.dump({"enable": enable, "prof_dir": prof_dir, "generation": generation}, f)
    made = time.monotonic()
    os.replace(temp, path)
    return made


def edits(folder: str) -> Dict[str, object]:
    path = os.path.join(folder, "ms_service_profiler_config.json")
    prof_dir = os.path.join(folder, "prof")
    edit(path, 0, 0, prof_dir)
    source = ServiceSource(path, {"HOME": folder}, ProfilerSlot(), CommandRouter())
    source.start()
    mindie = MindiePoll(path)
    ours_ms: List[float] = []
    made_at: Dict[int, float] = {}
    try:
        for generation in range(1, EDITS + 1):
            time.sleep(random.uniform(0.2, 0.7))  # the next edit lands anywhere in a second
            enable = generation % 2
            made_at[generation] = edit(path, enable, generation, prof_dir)
            # Polling the switch's state is the measurement: every 0.2 ms, never backing off.
            wait_until(
                lambda on=bool(enable): (api._active is not None) == on,
                30,
                "the switch to turn",
                pause=0.0002,
            )
            ours_ms.append((time.monotonic() - made_at[generation]) * 1000)
        time.sleep(1.2)  # let the 100 ms loop see the last edit
    finally:
        mindie.stop()
        source.stop()
    theirs_ms = [(mindie.seen_at[g] - made) * 1000 for g, made in made_at.items() if g in mindie.seen_at]
    return {
        "ours_ms": ours_ms,
        "mindie_ms": theirs_ms,
        "mindie_missed": EDITS - len(theirs_ms),
        "mode": source.watch_mode,
    }


def chain(n: int) -> float:
    """Seconds for *n* instrumented events, as a service writes them."""
    began = time.perf_counter()
    for _ in range(n):
        Profiler(Level.INFO).domain("Request").res("req-1").event("httpReq")
    return time.perf_counter() - began


def enabled(folder: str) -> Dict[str, object]:
    path = os.path.join(folder, "on.json")
    with open(path, "w") as f:
        json.dump({"enable": 1, "prof_dir": os.path.join(folder, "prof-on")}, f)
    source = ServiceSource(path, {"HOME": folder}, ProfilerSlot(), CommandRouter())
    source.start()
    try:
        full_s = chain(RATE)
        store = api._active.store if api._active is not None else None
        while store is not None and store.backlog:
            time.sleep(0.01)  # the burst written before the paced run begins
        made = 0
        began = time.perf_counter()
        while (elapsed := time.perf_counter() - began) < PACED_S:
            due = int(elapsed * RATE)
            if due > made:
                batch = min(1000, due - made)
                chain(batch)
                made += batch
        store = api._active.store if api._active is not None else None
    finally:
        source.stop()
    assert store is not None
    return {
        "caller_ns_per_event": full_s / RATE * 1e9,
        "full_speed_per_s": RATE / full_s,
        "events": RATE + made,
        "written": store.written,
        "dropped": store.dropped,
    }


def disabled_ns() -> float:
    api.attach(None)
    chain(BATCH)  # warm
    return percentile([chain(BATCH) / BATCH * 1e9 for _ in range(BATCHES)], 50)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        switched = edits(tmp)
        off_ns = disabled_ns()
        on = enabled(tmp)
    ours, theirs = switched["ours_ms"], switched["mindie_ms"]
    assert isinstance(ours, list) and isinstance(theirs, list)
    reference = (
        f"MindIE loop: p50 {percentile(theirs, 50):.0f} ms, missed {switched['mindie_missed']}/{EDITS}"
    )
    figures = [
        Figure("edit -> recording on/off: p50", percentile(ours, 50), "ms", "<= 50", reference),
        Figure(
            "edit -> recording on/off: p99",
            percentile(ours, 99),
            "ms",
            "<= 150",
            f"MindIE loop: p99 {percentile(theirs, 99):.0f} ms",
        ),
        Figure("edits missed", 0, "", "", f"MindIE loop: {switched['mindie_missed']}"),
        Figure("disabled: Profiler(...).domain().res().event()", off_ns, "ns", "<= 1000", "—"),
        Figure("enabled: caller's cost per event", float(on["caller_ns_per_event"]), "ns", "", "—"),  # type: ignore[arg-type]
        Figure(
            "enabled: events/s from one thread, full speed",
            float(on["full_speed_per_s"]),
            "/s",
            ">= 200000",
            "—",
        ),  # type: ignore[arg-type]
        Figure(
            f"enabled, paced at {RATE}/s for {PACED_S:g} s: dropped", float(on["dropped"]), "", "<= 0", "—"
        ),  # type: ignore[arg-type]
    ]
    notes = [
        f"{EDITS} edits 0.2-0.7 s apart, alternating enable 1 / 0; the switch's watcher: {switched['mode']}",
        f"paced run: {on['events']} events made, {on['written']} rows written, {on['dropped']} dropped",
    ]
    report("service", figures, notes, {**switched, **on, "disabled_ns": off_ns})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
