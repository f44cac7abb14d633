"""``dyno gputrace``: dynolog's on-demand Kineto trace, for stock PyTorch and plugin processes alike.
Its flags are the declaration's (:data:`msmonitor_contract.kinds.GPUTRACE`), field by field."""

from __future__ import annotations

import dataclasses
from argparse import Namespace

from msmonitor_contract.kinds import GPUTRACE

from ..declared import declared, request, unset
from ..flags import COLLECT, SYNC, WAIT, WAIT_TIMEOUT, Command, Flag
from ..fleet.target import Target

FLAGS = (
    *unset(declared(GPUTRACE), "--iterations"),  # a typed 0 is refused, not "not given"
    Flag(
        "--fail-on-no-process",
        None,
        bool,
        False,
        "exit 1 when no process matched (without it, as dynolog: the answer says so and dyno exits 0)",
    ),
    WAIT._replace(help="wait until every triggered process wrote its file"),
    WAIT_TIMEOUT,
    COLLECT,
    SYNC,
)


def run(target: Target, args: Namespace) -> None:
    """Trace running PyTorch processes the way dynolog does (stock Kineto writes the file itself).

    Example: dyno gputrace --log-file /tmp/t.json --iterations 5 --wait
    """
    from ..tracing.start import start_trace

    trace = request(GPUTRACE, FLAGS, args)
    trace = dataclasses.replace(trace, iterations=max(trace.iterations, 0))  # dynolog's -1 is 0 on the wire
    start_trace(target, args, GPUTRACE, trace, no_match_ok=not args.fail_on_no_process)


COMMAND = Command("gputrace", run, FLAGS, across=run)  # run fans out itself: tracing.start.start_trace
