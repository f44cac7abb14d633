"""``dyno nputrace``: capture chosen steps of running processes (msMonitor's flags, plus targeting).
Its flags are the declaration's (:data:`msmonitor_contract.kinds.NPUTRACE`), field by field."""

from __future__ import annotations

import dataclasses
from argparse import Namespace

from msmonitor_contract.kinds import NPUTRACE

from ..declared import declared, request, unset
from ..flags import COLLECT, SYNC, WAIT, WAIT_TIMEOUT, Command
from ..fleet.target import Target

FLAGS = (
    *unset(declared(NPUTRACE), "--iterations"),  # a typed 0 is refused, not "not given"
    WAIT._replace(help="wait until every triggered process wrote its files"),
    WAIT_TIMEOUT,
    COLLECT,
    SYNC._replace(
        help="with --hosts: start the trace at one step on every host (with --iterations: the step is "
        "chosen from every host's processes' steps and rates, as --start-step) or, time-based, at one "
        "instant (sets --profile-start-time from the round trips); the answer states it"
    ),
)


def run(target: Target, args: Namespace) -> None:
    """Trace steps of running processes: torch_npu/MindSpore on Ascend, torch.profiler elsewhere.

    Example: dyno nputrace --start-step 120 --iterations 3 --log-file /data/traces --analyse --wait

    On many hosts, --sync starts the trace at one step (with --iterations: dyno picks the step from
    every host's processes) or at one instant (a time-based trace) everywhere:
      dyno --hosts 'node[001-016]' nputrace --job-id 77 --iterations 3 --log-file /data/traces --sync --wait
    """
    from ..tracing.start import start_trace

    trace = request(NPUTRACE, FLAGS, args)
    if trace.iterations:  # msMonitor sends --duration-ms only with a time-based trace
        trace = dataclasses.replace(trace, duration_ms=0)
    start_trace(target, args, NPUTRACE, trace)


COMMAND = Command("nputrace", run, FLAGS, across=run)  # run fans out itself: tracing.start.start_trace
