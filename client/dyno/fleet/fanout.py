"""One command on many daemons at once: ``--hosts``, ``--hostfile`` or ``--slurm-job`` instead of
``--hostname``.

A command keeps one way to ask one daemon (``ask``: the typed gRPC answer, or a :class:`CliError`)
and says how its answers print (:class:`View`). Here every host is asked on a pool of at most
``--parallel`` threads; the answers print as one table with a HOST column (or, with ``--json``, one
object per host) and a summary line, and the exit status is 0 when every host answered effective, 1
when some did not, 3 when none could be reached.

Each host has its own deadline: every call carries ``--timeout`` from the moment that host's turn
comes, so a slow or dead host costs its own timeout and holds up no other host's answer.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Sequence, Tuple

from ..exits import EXIT_FAILED, EXIT_UNREACHABLE, CliError
from ..output import print_json, table
from . import hosts
from .target import Target

EFFECTIVE, INEFFECTIVE, UNREACHABLE = "effective", "ineffective", "unreachable"
Ask = Callable[[Target], Any]


class Outcome(NamedTuple):
    """What one host answered, or why it did not."""

    host: str
    answer: Any = None  # the command's typed answer (a gRPC response); None when there is none
    state: str = EFFECTIVE
    why: str = ""  # what kept it from being effective, in one line
    reason: str = ""  # unreachable: refused, TLS, timeout, DNS or unavailable
    seconds: float = 0.0  # from the host's turn to its answer: the round trip, connection included


def always_effective(answer: Any) -> str:
    return ""


class View(NamedTuple):
    """How one command's answers print across hosts."""

    headers: Tuple[str, ...]  # of the table, after HOST
    rows: Callable[[Any], List[List[str]]]  # one host's answer as rows of the table
    json: Callable[[Any], Any]  # one host's answer as single-host --json prints it
    judge: Callable[[Any], str] = always_effective  # why an answer is not effective; "" when it is


def fleet(target: Target) -> List[Target]:
    """One target per host the fan-out flags name, each with the other global options."""
    names = hosts.resolve(target.hosts, target.hostfile, target.slurm_job)
    one = target._replace(hosts=None, hostfile=None, slurm_job=None)
    if one.tls:  # read and checked once, here: a bad --certs-dir is one usage error before any call
        from ..edge.connection import credentials

        credentials(one)
    targets = []
    for name in names:
        host, port = hosts.split_port(name, one.port)
        targets.append(one._replace(hostname=host, port=port, name=name))
    return targets


def run(target: Target, ask: Ask, view: View) -> None:
    """Ask every host, print the merged answer, exit as the summary says."""
    outcomes = gather(fleet(target), ask, target.parallel, view.judge)
    show(target, outcomes, view)
    verdict(outcomes)


def gather(
    targets: Sequence[Target], ask: Ask, parallel: int, judge: Callable[[Any], str] = always_effective
) -> List[Outcome]:
    """Each target's outcome, in the targets' order, at most *parallel* asked at once."""
    if not targets:
        return []
    from concurrent.futures import ThreadPoolExecutor  # it imports logging: only a fan-out pays

    with ThreadPoolExecutor(min(parallel, len(targets))) as pool:
        return list(pool.map(lambda target: outcome(target, ask, judge), targets))


def outcome(target: Target, ask: Ask, judge: Callable[[Any], str] = always_effective) -> Outcome:
    started = time.monotonic()
    try:
        answer = ask(target)
    except CliError as exc:
        state = UNREACHABLE if exc.exit_code == EXIT_UNREACHABLE else INEFFECTIVE
        first_line = str(exc).splitlines()[0]
        return Outcome(target.label, None, state, first_line, exc.reason, time.monotonic() - started)
    why = judge(answer)
    state = INEFFECTIVE if why else EFFECTIVE
    return Outcome(target.label, answer, state, why, "", time.monotonic() - started)


def merge(*phases: Iterable[Outcome]) -> List[Outcome]:
    """Each host's latest outcome across the phases of one command, in the order hosts first came."""
    latest: Dict[str, Outcome] = {}
    for phase in phases:
        latest.update((o.host, o) for o in phase)
    return list(latest.values())


# --- printing ---------------------------------------------------------------------------------------


def show(target: Target, outcomes: Sequence[Outcome], view: View) -> None:
    if target.json:
        print_json([host_json(o, view) for o in outcomes])
    else:
        print(render(outcomes, view))
        print(summary(outcomes), flush=True)


def render(outcomes: Sequence[Outcome], view: View) -> str:
    """The answers as one table, a HOST column first, then one line for each host that gave none."""
    rows: List[List[str]] = []
    for o in outcomes:
        if o.answer is not None:
            own = view.rows(o.answer) or [["(none)", *[""] * (len(view.headers) - 1)]]
            rows += [[o.host, *row] for row in own]
    lines = [table(("HOST", *view.headers), rows)] if rows else []
    lines += [f"{o.host}  {_state(o)}: {o.why}" for o in outcomes if o.answer is None]
    return "\n".join(lines)


def summary(outcomes: Sequence[Outcome]) -> str:
    """``16 hosts: 14 effective, 1 ineffective, 1 unreachable (1 timeout)``."""
    states = collections.Counter(o.state for o in outcomes)
    reasons = collections.Counter(o.reason for o in outcomes if o.state == UNREACHABLE)
    why = f" ({', '.join(f'{n} {reason}' for reason, n in reasons.most_common())})" if reasons else ""
    return (
        f"{_hosts(len(outcomes))}: {states[EFFECTIVE]} effective, {states[INEFFECTIVE]} ineffective, "
        f"{states[UNREACHABLE]} unreachable{why}"
    )


def host_json(o: Outcome, view: View) -> Dict[str, Any]:
    data: Dict[str, Any] = {"host": o.host, "state": o.state}
    if o.reason:
        data["reason"] = o.reason
    if o.why:
        data["why"] = o.why
    if o.answer is not None:
        data["answer"] = view.json(o.answer)
    return data


def verdict(outcomes: Sequence[Outcome]) -> None:
    """Raise the exit status the outcomes call for: none when every host answered effective."""
    missing = [o.host for o in outcomes if o.state != EFFECTIVE]
    if not missing:
        return
    if all(o.state == UNREACHABLE for o in outcomes):
        raise CliError(f"no host could be reached ({summary(outcomes)})", EXIT_UNREACHABLE)
    raise CliError(
        f"{len(missing)} of {_hosts(len(outcomes))} did not answer effective: {hosts.as_hostlist(missing)}",
        EXIT_FAILED,
    )


def _state(o: Outcome) -> str:
    return f"{o.state} ({o.reason})" if o.reason else o.state


def _hosts(n: int) -> str:
    return f"{n} host" if n == 1 else f"{n} hosts"


# --- streams ----------------------------------------------------------------------------------------


class Event(NamedTuple):
    """The next item of one host's stream, or (item None) the end of it and why."""

    host: str
    item: Any = None
    why: str = ""
    reason: str = ""
    retry_s: float = 0.0  # (item None) when the stream is opened again


RECONNECT_S = (1.0, 30.0)  # a stream that ended is opened again after this, doubling while it fails


def stream(
    targets: Sequence[Target], open_stream: Callable[[Target], Iterable[Any]]
) -> Iterator[List[Event]]:
    """Every host's stream merged: batches of what arrived since the last batch, so a consumer that is
    slower than the streams (a redraw) falls behind by one batch, not by a backlog. Each stream runs
    on a thread of its own: a stream is held open for its whole life, and --parallel bounds calls in
    flight, not these. A stream that ends (a daemon restarted, a network blip) is an event (item None)
    and is opened again; the merge runs until its consumer closes it (no stream is opened again then)."""
    events: queue.Queue[Event] = queue.Queue()
    closed = threading.Event()
    for target in targets:
        threading.Thread(target=_pump, args=(target, open_stream, events, closed), daemon=True).start()
    try:
        while True:
            batch = [events.get()]
            while not events.empty():
                batch.append(events.get_nowait())
            yield batch
    finally:
        closed.set()


def _pump(
    target: Target,
    open_stream: Callable[[Target], Iterable[Any]],
    events: queue.Queue[Event],
    closed: threading.Event,
) -> None:
    retry = RECONNECT_S[0]
    while not closed.is_set():
        try:
            for item in open_stream(target):
                retry = RECONNECT_S[0]
                events.put(Event(target.label, item))
            why, reason = "the daemon ended the stream", ""
        except CliError as exc:
            why, reason = str(exc).splitlines()[0], exc.reason
        events.put(Event(target.label, None, why, reason, retry))
        closed.wait(retry)
        retry = min(retry * 2, RECONNECT_S[1])
