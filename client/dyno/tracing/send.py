"""A trace command sent to one host or to many, and each host's trace followed to its end: what
``dyno nputrace``/``gputrace`` (:mod:`.start`), ``--sync`` (:mod:`.sync`) and ``dyno respond`` share."""

from __future__ import annotations

import dataclasses
from argparse import Namespace
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from msmonitor_contract.schema import Kind

from ..answers import COMMAND_HEADERS, command_json, command_rows, judge_command
from ..edge.rpc import Daemon
from ..fleet import fanout
from ..fleet.target import Target
from ..model.commands import CommandResponse
from ..model.traces import TraceInfo
from .progress import all_finished, watch


class Order(NamedTuple):
    """A trace command as every host is sent it: its *kind*, its *request*, and the command's flags
    (*args*: --wait and --collect follow a trace by its id, which a C++ daemon cannot)."""

    kind: Kind
    request: Any
    args: Optional[Namespace] = None

    def at(self, **fields: Any) -> Order:
        """The same order, its request with *fields* changed (a start step, a start time)."""
        return self._replace(request=dataclasses.replace(self.request, **fields))


class Started(NamedTuple):
    """One host's answer to a trace command, and its trace as last seen when ``--wait`` followed it."""

    response: CommandResponse
    info: Optional[TraceInfo] = None


def send(target: Target, order: Order) -> Started:
    """*order* to one daemon: its answer. A C++ daemon is sent its own request, refused first what it
    cannot do. Raises CliError: the host unreachable, or a C++ daemon asked for what it cannot do."""
    needs = [flag for flag, given in _following(order.args) if given]
    return Started(Daemon(target, "this trace").command(order.kind, order.request, needs))


def _following(args: Optional[Namespace]) -> Sequence[Any]:
    if args is None:
        return ()
    return (("--wait", getattr(args, "wait", False)), ("--collect", getattr(args, "collect", None)))


def start_on(fleet: Sequence[Target], order: Order, parallel: int) -> List[fanout.Outcome]:
    """*order* sent to every host of *fleet*, at most *parallel* at once: each host's outcome, in
    *fleet*'s order (its answer a :class:`Started`; effective when a process there took it)."""
    return fanout.gather(fleet, lambda one: send(one, order), parallel, judge)


def follow(
    fleet: Sequence[Target], answered: Sequence[fanout.Outcome], timeout: float, quiet: bool = True
) -> List[fanout.Outcome]:
    """Every effective host's trace in *answered* (from :func:`start_on`), followed to its end at
    once, for at most *timeout* s: a follow waits, it does not load the daemon, so --parallel does not
    queue them behind each other. Each outcome's answer is its Started with ``info`` (the TraceInfo
    last seen); ineffective when not every process there finished. Progress on stderr unless *quiet*."""
    started = {o.host: o.answer for o in answered if o.state == fanout.EFFECTIVE}

    def follow_one(one: Target) -> Started:
        answer: Started = started[one.label]
        info = watch(one, answer.response.trace_id, timeout, quiet=quiet, label=one.label)
        return answer._replace(info=info)

    return fanout.gather([one for one in fleet if one.label in started], follow_one, len(started), judge)


def judge(started: Started) -> str:
    """Why one host's Started is not effective (no process took it, or not every process finished
    the trace it followed); "" when it is."""
    why = judge_command(started.response)
    if not why and started.info is not None and not all_finished(started.info):
        return f"trace {started.info.trace_id}: not every process finished it"
    return why


def started_view(synced: Dict[str, int]) -> fanout.View:
    """How the hosts' answers print; *synced*: what --sync chose (the start time or step), added to each
    host's JSON."""

    def to_json(started: Started) -> Dict[str, Any]:
        return {**command_json(started.response, started.info), **synced}

    headers = (COMMAND_HEADERS[0], "TRACE ID", *COMMAND_HEADERS[1:])
    return fanout.View(headers, lambda s: command_rows(s.response, trace=True), to_json, judge)
