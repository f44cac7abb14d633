"""``dyno trace ID``: the lifecycle of one trace, per process — on any later call; ``dyno trace``: the
recent traces, with their ids."""

from __future__ import annotations

from argparse import Namespace
from typing import Any, Dict, Sequence, Tuple

from ..exits import EXIT_USAGE, CliError
from ..flags import COLLECT, WAIT_TIMEOUT, Command, Flag
from ..fleet.target import Target
from ..model.traces import TraceInfo, TraceSummary
from ..output import as_dict, print_json

FLAGS = (
    Flag(
        "trace_id",
        None,
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
        print_json(listed_json(listed)) if target.json else print_traces(listed)
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
        listing = fanout.View(LIST_HEADERS, listed_rows, listed_json)
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


def recent(target: Target, args: Namespace) -> Tuple[TraceSummary, ...]:
    from ..edge.rpc import Daemon

    return Daemon(target, "dyno trace").list_traces(args.limit)


def listed_json(listed: Sequence[TraceSummary]) -> Dict[str, Any]:
    return {"traces": [as_dict(t) for t in listed]}


def _verdict(info: TraceInfo, args: Namespace) -> str:
    """Why the answer is a failure: a process failed the trace (not one it was cancelled in: that was
    asked for), or --wait gave up before it was done."""
    from ..tracing.progress import trace_failed

    failed = "" if args.cancel else trace_failed(info)
    if not failed and args.wait and not info.done:
        failed = f"trace {info.trace_id} not done after --wait-timeout {args.wait_timeout:g} s"
    return failed


def ask(target: Target, args: Namespace, label: str = "") -> TraceInfo:
    from ..edge.rpc import Daemon
    from ..tracing.progress import watch

    if args.cancel:
        cancelled = Daemon(target, "dyno trace --cancel").cancel_trace(args.trace_id)
        if not args.wait or cancelled.done:
            return cancelled
    if args.wait:
        return watch(target, args.trace_id, args.wait_timeout, quiet=target.json, label=label)
    return Daemon(target, "dyno trace").get_trace(args.trace_id)


COMMAND = Command("trace", run, FLAGS, across)
