"""Starting a trace (``dyno nputrace``, ``gputrace``): the request checked and sent, the answer
printed, and with ``--wait`` the trace followed to its end and its files collected — on one host, or on
many (dyno.fanout), with ``--sync`` at one instant on all.

It loads gRPC and protobuf: those commands import it inside ``run``.
"""

from __future__ import annotations

import sys
import time
from argparse import Namespace
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Protocol, Tuple, TypeVar

from dynoproto import dynolog_pb2 as pb
from dynoproto import validate

from . import collect, fanout, legacy_commands
from .answers import COMMAND_HEADERS, NOT_TAKEN, command_json, command_rows, judge_command, print_response
from .cli import check_fields
from .commands import status
from .connection import connect
from .exits import EXIT_USAGE, CliError
from .legacy import LegacyDaemon
from .output import print_json
from .target import Target, absolute_path
from .trace_progress import TRACE_HEADERS, all_finished, clock, print_trace, trace_rows, watch

_NO_MATCH = (pb.REASON_NO_PROCESS_MATCHED, pb.REASON_NO_PROCESS_REGISTERED)


class TraceFields(Protocol):
    """What starting a trace reads and sets in a trace kind's request, whichever kind it is."""

    log_file: str
    iterations: int
    profile_start_time_ms: int


TraceRequest = TypeVar("TraceRequest", bound=TraceFields)
Rpc = Callable[[Any], Callable[..., pb.CommandResponse]]  # picks the stub's method
# --sync: the start instant is this far ahead of the slowest round trip, times three per wave of
# --parallel hosts: the command's own round trip, and room for a host that answered fast once.
SYNC_MARGIN_S = 1.0
SYNC_ROUND_TRIPS = 3


class Started(NamedTuple):
    """One host's answer to a trace command, and its trace as last seen when ``--wait`` followed it."""

    response: pb.CommandResponse
    info: Optional[pb.TraceInfo] = None


def start_trace(
    target: Target,
    args: Namespace,
    request: TraceRequest,
    errors: Callable[[TraceRequest], List[validate.FieldError]],
    rpc: Rpc,
    no_match_ok: bool = False,
) -> None:
    """Check and send a trace request, print the answer, and with ``--wait`` follow the trace until every
    process wrote its files. *no_match_ok*: no process matched (or none registered) is not a failure, as
    dynolog's gputrace without ``--fail-on-no-process``. Across hosts, see :func:`_start_across`."""
    collect.check(args)
    if target.fans_out:
        return _start_across(target, args, request, errors, rpc)
    if args.sync:
        raise CliError("--sync lines up a trace on many hosts: name them with --hosts", EXIT_USAGE)
    request.log_file = absolute_path(target, request.log_file)
    check_fields(errors(request))
    response = _send(target, request, rpc, args).response
    if not target.json:
        print_response(response, flush=True)  # the answer first; progress follows while waiting
    taken = response.command_status == pb.COMMAND_STATUS_EFFECTIVE
    info = (
        watch(target, response.trace_id, args.wait_timeout, quiet=target.json)
        if taken and args.wait
        else None
    )
    if target.json:
        print_json(command_json(response, info))
    elif info is not None:
        print_trace(info)
    missing = collect.requested(args, [(target, info.trace_id)] if info else [], target.json)
    if not taken and not (no_match_ok and response.reason in _NO_MATCH):
        raise CliError(NOT_TAKEN)
    if info is not None and not all_finished(info):
        raise CliError(f"trace {info.trace_id}: not every process finished it")
    if missing:
        raise CliError(missing)


def _start_across(
    target: Target,
    args: Namespace,
    request: TraceRequest,
    errors: Callable[[TraceRequest], List[validate.FieldError]],
    rpc: Rpc,
) -> None:
    """The trace on every host: one table of the answers; with ``--sync`` one start instant for all;
    with ``--wait`` every host's trace followed at once until its files are written."""
    check_fields(errors(request))  # the path as given: a relative one means nothing on the other hosts
    if args.sync:
        _check_sync(request)
    fleet = fanout.fleet(target)
    probes, fleet = _synchronise(target, fleet, request) if args.sync else ([], fleet)
    sent = fanout.gather(fleet, lambda one: _send(one, request, rpc, args), target.parallel, _judge)
    if args.sync:
        _warn_if_late(request.profile_start_time_ms)
    view = _started_view(request.profile_start_time_ms if args.sync else 0)
    answered = fanout.merge(probes, sent)
    if args.wait:
        return _wait_across(target, args, fleet, answered, view)
    fanout.show(target, answered, view)
    fanout.verdict(answered)


def _wait_across(
    target: Target, args: Namespace, fleet: List[Target], answered: List[fanout.Outcome], view: fanout.View
) -> None:
    """The answers first; then every effective host's trace followed at once (progress on stderr);
    then one table of every process of every host with its files."""
    if not target.json:
        print(fanout.render(answered, view), flush=True)
    followed = _follow(target, args, fleet, answered)
    final = fanout.merge(answered, followed)
    if target.json:
        print_json([fanout.host_json(o, view) for o in final])
    else:
        if followed:
            files = fanout.View(TRACE_HEADERS, lambda started: trace_rows(started.info), view.json)
            print(fanout.render(followed, files))
        print(fanout.summary(final), flush=True)
    seen = {o.host: o.answer.info for o in followed if o.answer is not None and o.answer.info is not None}
    traced = [(one, seen[one.label].trace_id) for one in fleet if one.label in seen]
    missing = collect.requested(args, traced, target.json)
    fanout.verdict(final)
    if missing:
        raise CliError(missing)


def _send(target: Target, request: Any, rpc: Rpc, args: Namespace) -> Started:
    try:
        with connect(target, "this trace") as stub:
            return Started(rpc(stub)(request, timeout=target.timeout))
    except LegacyDaemon as old:  # a C++ daemon: its own request, without what it cannot do
        return Started(legacy_commands.trace(old.host, request, args))


def _follow(
    target: Target, args: Namespace, fleet: List[Target], answered: List[fanout.Outcome]
) -> List[fanout.Outcome]:
    """Every effective host's trace, followed to its end at once: a follow waits, it does not load the
    daemon, so --parallel does not queue them behind each other."""
    started = {o.host: o.answer for o in answered if o.state == fanout.EFFECTIVE}

    def follow(one: Target) -> Started:
        answer: Started = started[one.label]
        trace_id = answer.response.trace_id
        info = watch(one, trace_id, args.wait_timeout, quiet=target.json, label=one.label)
        return answer._replace(info=info)

    return fanout.gather([one for one in fleet if one.label in started], follow, len(started), _judge)


def _check_sync(request: TraceRequest) -> None:
    if request.iterations > 0:
        raise CliError(
            "--sync: a step-based trace (--iterations) already lines up by step number on every host; "
            "--sync is for time-based traces (--duration-ms)",
            EXIT_USAGE,
        )
    if request.profile_start_time_ms:
        raise CliError("--sync sets --profile-start-time itself: give one or the other", EXIT_USAGE)


def _synchronise(
    target: Target, fleet: List[Target], request: TraceRequest
) -> Tuple[List[fanout.Outcome], List[Target]]:
    """Set the request's start to one instant far enough ahead for every host, measured from this
    fan-out's own round trips (GetStatus, the connection included, as the command's will be). Returns
    the hosts that could not be reached, and the ones that can."""
    probes = fanout.gather(fleet, status.ask, target.parallel)
    reached = [one for one, probe in zip(fleet, probes) if probe.state == fanout.EFFECTIVE]
    slowest = max((p.seconds for p in probes if p.state == fanout.EFFECTIVE), default=0.0)
    waves = -(-len(reached) // target.parallel)
    ahead = SYNC_MARGIN_S + SYNC_ROUND_TRIPS * slowest * waves
    request.profile_start_time_ms = int((time.time() + ahead) * 1000)
    if reached and not target.json:
        start_ms = request.profile_start_time_ms
        print(
            f"profile start time: {start_ms} ({clock(start_ms / 1000)} here, {ahead:.2f}s ahead; "
            f"slowest round trip {slowest * 1000:.0f} ms)",
            flush=True,
        )
    return [p for p in probes if p.state != fanout.EFFECTIVE], reached


def _warn_if_late(start_ms: int) -> None:
    late_ms = time.time() * 1000 - start_ms
    if late_ms > 0:
        print(
            f"dyno: --sync: the last answer came {late_ms:.0f} ms after the start time: a host that took "
            "the command that late starts its trace at its next step instead",
            file=sys.stderr,
        )


def _started_view(sync_ms: int) -> fanout.View:
    def to_json(started: Started) -> Dict[str, Any]:
        data = command_json(started.response, started.info)
        if sync_ms:
            data["profile_start_time_ms"] = sync_ms
        return data

    headers = (COMMAND_HEADERS[0], "TRACE ID", *COMMAND_HEADERS[1:])
    return fanout.View(headers, lambda s: command_rows(s.response, trace=True), to_json, _judge)


def _judge(started: Started) -> str:
    why = judge_command(started.response)
    if not why and started.info is not None and not all_finished(started.info):
        return f"trace {started.info.trace_id}: not every process finished it"
    return why
