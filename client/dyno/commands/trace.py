"""``dyno trace ID``: the lifecycle of one trace, per process — on any later call; ``dyno trace``: the
recent traces, with their ids."""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING

from ..cli import COLLECT, WAIT_TIMEOUT, Command, Flag, fill
from ..exits import EXIT_USAGE, CliError
from ..fleet.target import Target
from ..output import as_dict, print_json

if TYPE_CHECKING:
    from dynoproto import dynolog_pb2 as pb

FLAGS = (
    Flag(
        "trace_id",
        "trace_id",
        str,
        None,
        "the id nputrace or gputrace printed; without it, the recent traces and their ids",
        optional=True,
    ),
    Flag("--limit", None, int, 20, "without TRACE_ID: list the newest this many", minimum=1, maximum=1000),
    Flag("--wait", None, bool, False, "wait until every process finished or failed"),
    Flag(
        "--cancel",
        None,
        bool,
        False,
        "cancel it (operators only): a process still waiting for its start drops it, one recording stops "
        "at its next step and writes what it recorded",
    ),
    WAIT_TIMEOUT,
    COLLECT,
)


def run(target: Target, args: Namespace) -> None:
    """Show where one trace stands in each process, or (no id) list the recent traces and their ids.

    With an id: each process's phase, steps, files or error. Without: the newest traces first (--limit),
    each with its kind, when it was sent, how many processes are in each phase, its folder and files:
      dyno --hostname node001 trace

    With --collect DIR, then fetch the files of every process that finished it into DIR here:
      dyno --hostname node001 trace 123456789012345678 --wait --collect ./job-traces
    With --cancel, cancel it first, so that a trace waiting for a step that never comes frees its processes:
      dyno --hostname node001 trace 123456789012345678 --cancel
    """
    from ..tracing import collect
    from ..tracing.progress import print_trace, print_traces

    if _listing(args):
        listed = recent(target, args)
        print_json(as_dict(listed)) if target.json else print_traces(listed)
        return
    info = ask(target, args)
    if target.json:
        print_json(as_dict(info))
    else:
        print_trace(info)
    missing = collect.requested(args, [(target, info.trace_id)], target.json)
    failed = _verdict(info, args) or missing
    if failed:
        raise CliError(failed)


def across(target: Target, args: Namespace) -> None:
    """Each daemon keeps its own trace ids: the hosts that do not know this one say so."""
    from ..fleet import fanout
    from ..tracing import collect
    from ..tracing.progress import LIST_HEADERS, TRACE_HEADERS, listed_rows, trace_rows

    if _listing(args):
        listing = fanout.View(LIST_HEADERS, listed_rows, as_dict)
        asked = fanout.gather(fanout.fleet(target), lambda one: recent(one, args), target.parallel)
        fanout.show(target, asked, listing)
        fanout.verdict(asked)
        return
    view = fanout.View(TRACE_HEADERS, trace_rows, as_dict, lambda info: _verdict(info, args))
    fleet = fanout.fleet(target)
    asked = fanout.gather(fleet, lambda one: ask(one, args, label=one.hostname), target.parallel, view.judge)
    fanout.show(target, asked, view)
    known = [(one, args.trace_id) for one, o in zip(fleet, asked) if o.answer is not None]
    missing = collect.requested(args, known, target.json)
    fanout.verdict(asked)
    if missing:
        raise CliError(missing)


def _listing(args: Namespace) -> bool:
    """No id: list the recent traces. What acts on one trace needs its id."""
    if args.trace_id is not None:
        return False
    needs_id = [
        flag
        for flag, given in (("--wait", args.wait), ("--cancel", args.cancel), ("--collect", args.collect))
        if given
    ]
    if needs_id:
        raise CliError(
            f"{', '.join(needs_id)} acts on one trace: name its TRACE_ID (`dyno trace` lists them)",
            EXIT_USAGE,
        )
    return True


def recent(target: Target, args: Namespace) -> pb.ListTracesResponse:
    from dynoproto import dynolog_pb2 as pb

    from ..edge.connection import connect

    with connect(target, "dyno trace") as stub:
        return stub.ListTraces(pb.ListTracesRequest(limit=args.limit), timeout=target.timeout)


def _verdict(info: pb.TraceInfo, args: Namespace) -> str:
    """Why the answer is a failure: a process failed the trace (not one it was cancelled in: that was
    asked for), or --wait gave up before it was done."""
    from ..tracing.progress import trace_failed

    failed = "" if args.cancel else trace_failed(info)
    if not failed and args.wait and not info.done:
        failed = f"trace {info.trace_id} not done after --wait-timeout {args.wait_timeout:g} s"
    return failed


def ask(target: Target, args: Namespace, label: str = "") -> pb.TraceInfo:
    from dynoproto import dynolog_pb2 as pb

    from ..edge.connection import connect
    from ..tracing.progress import watch

    request = fill(pb.GetTraceRequest(), FLAGS, args)
    if args.cancel:
        with connect(target, "dyno trace --cancel") as stub:
            cancelled = stub.CancelTrace(request, timeout=target.timeout)
        if not args.wait or cancelled.done:
            return cancelled
    if args.wait:
        return watch(target, request.trace_id, args.wait_timeout, quiet=target.json, label=label)
    with connect(target, "dyno trace") as stub:
        return stub.GetTrace(request, timeout=target.timeout)


COMMAND = Command("trace", run, FLAGS, across)
