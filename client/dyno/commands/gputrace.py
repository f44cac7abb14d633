"""``dyno gputrace``: dynolog's on-demand Kineto trace, for stock PyTorch and plugin processes alike."""

from __future__ import annotations

from argparse import Namespace

from msmonitor_contract.vocabulary import DEFAULT_DURATION_MS, DEFAULT_START_ITERATION_ROUNDUP

from ..cli import COLLECT, SYNC, TARGETING, WAIT_TIMEOUT, Command, Flag, field_flag, fill
from ..fleet.target import Target

FLAGS = (
    Flag(
        "--log-file",
        "log_file",
        str,
        None,
        "trace file on the traced node; _<pid> is inserted before .json",
        required=True,
    ),
    Flag(
        "--duration-ms", "duration_ms", int, DEFAULT_DURATION_MS, "length of the trace (without --iterations)"
    ),
    Flag("--iterations", "iterations", int, -1, "steps to record (> 0 selects iteration mode)"),
    field_flag("profile_start_time_ms", int, 0, "epoch ms to start; 0: now"),
    Flag(
        "--profile-start-iteration-roundup",
        "profile_start_iteration_roundup",
        int,
        DEFAULT_START_ITERATION_ROUNDUP,
        "start at the next multiple of this step",
    ),
    *TARGETING,
    Flag("--record-shapes", "record_shapes", bool, False, "operator input shapes"),
    Flag("--profile-memory", "profile_memory", bool, False, "memory profile (duration traces)"),
    Flag("--with-stacks", "with_stack", bool, False, "Python call stacks", aliases=("--with-stack",)),
    Flag("--with-flops", "with_flops", bool, False, "operator FLOPs"),
    Flag("--with-modules", "with_modules", bool, False, "module hierarchy"),
    Flag(
        "--fail-on-no-process",
        None,
        bool,
        False,
        "exit 1 when no process matched (without it, as dynolog: the answer says so and dyno exits 0)",
    ),
    Flag("--wait", None, bool, False, "wait until every triggered process wrote its file"),
    WAIT_TIMEOUT,
    COLLECT,
    SYNC,
)


def run(target: Target, args: Namespace) -> None:
    """Trace running PyTorch processes the way dynolog does (stock Kineto writes the file itself).

    Example: dyno gputrace --log-file /tmp/t.json --iterations 5 --wait
    """
    from dynoproto import dynolog_pb2 as pb
    from msmonitor_contract.kinds import GPUTRACE

    from ..tracing.start import start_trace

    request = fill(pb.GpuTraceRequest(), FLAGS, args)
    request.iterations = max(request.iterations, 0)  # dynolog's -1, "not given", is 0 on the wire
    start_trace(
        target,
        args,
        request,
        GPUTRACE.check,
        lambda stub: stub.GpuTrace,
        no_match_ok=not args.fail_on_no_process,
    )


COMMAND = Command("gputrace", run, FLAGS, across=run)  # run fans out itself: trace_start.start_trace
