"""``tests/workloads/train.py`` with the plugin's trace hand-offs timestamped inside the process.

    python benchmarks/_trace_probe.py EVENTS.json [train.py's arguments ...]

Used by ``benchmarks/trace.py``. The trace events the plugin sends to the daemon carry no timestamp,
and the daemon keeps only the time of a trace's latest phase, so the moments that matter — the plugin
took the command, the profiler started, the trace was written — are read here, in the process, on the
same wall clock as the benchmark's send time. The probe wraps the live agent's ``Tracer.accept`` (run
on the plugin's link thread when a pushed command arrives) and ``Tracer._report`` (run when a phase is
reported) with a ``time.time()`` and a list append; nothing on a step's path changes. It reaches into
the plugin's internals on purpose: when they change, ``EVENTS.json`` says ``"probe": false`` and the
benchmark falls back to the daemon's timestamps.

The events are written when the process exits (stdin closed, as for every workload).
"""

from __future__ import annotations

import atexit
import json
import runpy
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from msmonitor_plugin.imports import after_import

TRAIN = Path(__file__).resolve().parent.parent / "tests" / "workloads" / "train.py"

events_file = sys.argv[1]
sys.argv = [str(TRAIN), *sys.argv[2:]]
sys.path[0] = str(TRAIN.parent)  # as if train.py were run itself (and benchmarks/ shadows nothing)
events: List[Dict[str, Any]] = []


def install() -> bool:
    """Wrap the running agent's tracer; False when the plugin is not active or its shape changed."""
    agent = getattr(sys.modules.get("msmonitor_plugin"), "_agent", None)
    tracer = getattr(agent, "tracer", None)
    handlers = getattr(getattr(agent, "router", None), "_handlers", None)
    if tracer is None or handlers is None or not hasattr(tracer, "_report"):
        return False
    report = tracer._report

    def timed_accept(accept: Any) -> Any:
        def timed(command: Any) -> None:
            events.append({"what": "accept", "trace_id": command.trace_id, "t": time.time()})
            accept(command)

        return timed

    def timed_report(event: Any) -> None:
        events.append(
            {
                "what": event.phase,
                "trace_id": event.trace_id,
                "t": time.time(),
                "current_step": event.current_step,
            }
        )
        report(event)

    # The router holds the bound accept it was given: wrap the handlers it routes traces to.
    for kind, handler in list(handlers.items()):
        if handler == tracer.accept:
            handlers[kind] = timed_accept(handler)
    tracer._report = timed_report
    return True


probing = False


def install_after_torch(module: Any) -> None:
    """The plugin's agent starts when torch's import finishes; this hook runs just after it does."""
    global probing
    probing = install()


after_import(("torch",), install_after_torch)


def write() -> None:
    Path(events_file).write_text(json.dumps({"probe": probing, "events": events}))


atexit.register(write)  # runs before the plugin's own exit handler (registered earlier)
runpy.run_path(str(TRAIN), run_name="__main__")
