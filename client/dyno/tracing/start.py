"""Starting a trace (``dyno nputrace``, ``gputrace``): the request checked and sent, the answer printed,
and with ``--wait`` the trace followed to its end and its files collected — on one host, or on many
(dyno.fleet.fanout), with ``--sync`` at one step (``--iterations``) or one instant on all (:mod:`.sync`).
"""

from __future__ import annotations

import dataclasses
from argparse import Namespace
from typing import Any, List

from msmonitor_contract.kinds.tracing import typed_iterations
from msmonitor_contract.rules import FieldError
from msmonitor_contract.schema import Kind
from msmonitor_contract.vocabulary import Reason

from ..answers import NOT_TAKEN, command_json, print_response
from ..exits import EXIT_USAGE, CliError
from ..flags import check_fields
from ..fleet import fanout
from ..fleet.target import Target, absolute_path
from ..output import print_json
from . import collect, sync
from .progress import TRACE_HEADERS, all_finished, print_trace, trace_rows, watch
from .send import Order, follow, send, start_on, started_view

_NO_MATCH = (Reason.NO_PROCESS_MATCHED, Reason.NO_PROCESS_REGISTERED)


def start_trace(target: Target, args: Namespace, kind: Kind, request: Any, no_match_ok: bool = False) -> None:
    """Check and send a trace request of *kind*, print the answer, and with ``--wait`` follow the trace
    until every process wrote its files. *no_match_ok*: no process matched (or none registered) is not a
    failure, as dynolog's gputrace without ``--fail-on-no-process``. Across hosts, see
    :func:`_start_across`."""
    collect.check(args)
    if target.fans_out:
        return _start_across(target, args, kind, request)
    if args.sync:
        raise CliError("--sync lines up a trace on many hosts: name them with --hosts", EXIT_USAGE)
    request = dataclasses.replace(request, log_file=absolute_path(target, request.log_file))
    check_fields(_errors(kind, request, args))
    response = send(target, Order(kind, request, args)).response
    if not target.json:
        print_response(response, flush=True)  # the answer first; progress follows while waiting
    info = (
        watch(target, response.trace_id, args.wait_timeout, quiet=target.json)
        if response.effective and args.wait
        else None
    )
    if target.json:
        print_json(command_json(response, info))
    elif info is not None:
        print_trace(info)
    missing = collect.requested(args, [(target, info.trace_id)] if info else [], target.json)
    if not response.effective and not (no_match_ok and response.reason in _NO_MATCH):
        raise CliError(NOT_TAKEN)
    if info is not None and not all_finished(info):
        raise CliError(f"trace {info.trace_id}: not every process finished it")
    if missing:
        raise CliError(missing)


def _errors(kind: Kind, request: Any, args: Namespace) -> List[FieldError]:
    """What is wrong with *request*, and with ``--iterations`` as typed: a typed 0 is no time-based trace
    (the request's 0 is "not given"), gputrace's typed -3 none either."""
    errors = kind.check(request)
    if any(e.field == "iterations" for e in errors):
        return errors
    typed = [dataclasses.replace(e, flag="--iterations") for e in typed_iterations(args.iterations)]
    return typed + errors


def _start_across(target: Target, args: Namespace, kind: Kind, request: Any) -> None:
    """The trace on every host: one table of the answers; with ``--sync`` one start for all; with
    ``--wait`` every host's trace followed at once until its files are written."""
    check_fields(_errors(kind, request, args))  # the path as given: a relative one means nothing elsewhere
    if args.sync:
        sync.check(request)
    fleet = fanout.fleet(target)
    if args.sync and request.iterations > 0:
        synced = sync.start_at_one_step(fleet, Order(kind, request, args), target.parallel, quiet=target.json)
        answered, fleet = synced.outcomes, synced.sync.reached
        view = started_view({"start_step": synced.sync.start_step})
    else:
        probes: List[fanout.Outcome] = []
        if args.sync:
            probes, fleet, request = sync.synchronise(target, fleet, request)
        sent = start_on(fleet, Order(kind, request, args), target.parallel)
        if args.sync:
            sync.warn_if_late(request.profile_start_time_ms)
        view = started_view({"profile_start_time_ms": request.profile_start_time_ms} if args.sync else {})
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
    followed = follow(fleet, answered, args.wait_timeout, quiet=target.json)
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
