"""``--sync``: one trace started at the same moment on many hosts. With ``--iterations``, at one step:
chosen from every host's processes' steps and rates (:func:`sync_start_step`), sent, and sent once more
further ahead where a host had passed it (:func:`start_at_one_step`; ``dyno respond`` traces a job so).
A time-based trace starts at one instant instead (:func:`synchronise`), far enough ahead for the
slowest round trip."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

from msmonitor_contract.targets import Targets
from msmonitor_contract.vocabulary import Reason

from ..edge.rpc import Daemon
from ..exits import EXIT_FAILED, EXIT_USAGE, CliError
from ..fleet import fanout, hosts
from ..fleet.target import Target
from ..model.commands import CommandResponse
from ..model.daemon import ProcessInfo
from .progress import clock
from .send import Order, start_on

# --sync: the start instant is this far ahead of the slowest round trip, times three per wave of
# --parallel hosts: the command's own round trip, and room for a host that answered fast once.
SYNC_MARGIN_S = 1.0
SYNC_ROUND_TRIPS = 3
# --sync --iterations: every host's processes' steps are sampled twice this far apart (their step rate);
# the start step is ahead of the furthest process by the steps the fastest one makes in the --sync
# lead above plus STEP_LAG_S, and by SYNC_MIN_LEAD_STEPS at least. A step count reaches its daemon up
# to STEP_LAG_S late: the plugin looks for news every 0.25 s and sends a changed count at most every
# 0.5 s (msmonitor_plugin.link.CHECK_S, STEP_REPORT_S).
STEP_SAMPLE_S = 0.5
STEP_LAG_S = 0.75
SYNC_MIN_LEAD_STEPS = 2
# With pause_monitor a daemon first stops the monitors, waiting up to 2 s for their answers (the
# daemon's npumonitor.ANSWER_WAIT_S), before it decides whether the start step has passed.
PAUSE_LEAD_S = 2.0


class StepSync(NamedTuple):
    """The step every host's processes start one trace at, and how it was chosen."""

    start_step: int
    furthest_step: int  # the furthest matched process's step, as its daemon last heard it
    steps_per_s: float  # the fastest matched process's rate (0: none stepped between the samples)
    lead_steps: int  # start_step - furthest_step
    slowest_s: float  # the slowest host's round trip
    processes: int  # matched processes on the hosts reached
    reached: List[Target]  # the hosts that answered
    unreached: List[fanout.Outcome]  # the others, and why


class SyncedStart(NamedTuple):
    """:func:`start_at_one_step`'s result."""

    outcomes: List[fanout.Outcome]  # every host's: the unreachable ones' and the answers (Started)
    sync: StepSync  # the start step sent (the retry's, after one)
    late: List[str]  # hosts where the first start step had passed (then retried once), else empty


class _Sample(NamedTuple):
    at: float  # time.monotonic() when the answer came
    processes: Tuple[ProcessInfo, ...]


def check(request: Any) -> None:
    """What --sync cannot take: a start time or step of the user's, gputrace's step mode."""
    if request.profile_start_time_ms:
        raise CliError("--sync sets --profile-start-time itself: give one or the other", EXIT_USAGE)
    if request.iterations <= 0:
        return
    start_step = getattr(request, "start_step", None)
    if start_step is None:  # gputrace: Kineto rounds its start up itself
        raise CliError(
            "--sync: gputrace --iterations already lines up by step number on every host; --sync is for "
            "its time-based traces (--duration-ms)",
            EXIT_USAGE,
        )
    if start_step != -1:
        raise CliError(
            "--sync picks the start step itself: give --start-step or --sync, not both", EXIT_USAGE
        )


# --- one start step (--iterations) ------------------------------------------------------------------


def sync_start_step(
    fleet: Sequence[Target],
    targets: Targets,
    parallel: int,
    min_lead: int = SYNC_MIN_LEAD_STEPS,
    extra_s: float = 0.0,
) -> StepSync:
    """One start step for every process *targets* selects (job id, pids, ranks) on the hosts of
    *fleet*: every host's processes twice, STEP_SAMPLE_S apart (the step rate); the furthest step plus
    the steps the fastest process makes in SYNC_MARGIN_S + STEP_LAG_S + *extra_s* + SYNC_ROUND_TRIPS x
    the slowest round trip (per wave of *parallel* hosts), and at least *min_lead*. Raises CliError when
    no host reached has a matched process."""
    first = fanout.gather(fleet, lambda one: _sample(one, targets), parallel)
    time.sleep(STEP_SAMPLE_S)
    second = fanout.gather(fleet, lambda one: _sample(one, targets), parallel)
    reached = [one for one, a, b in zip(fleet, first, second) if fanout.EFFECTIVE == a.state == b.state]
    unreached = [b if b.state != fanout.EFFECTIVE else a for a, b in zip(first, second)]
    unreached = [o for o in unreached if o.state != fanout.EFFECTIVE]
    now = {
        (o.host, p.host_pid): (o.answer.at, p.current_step)
        for o in second
        if o.answer
        for p in o.answer.processes
    }
    if not now:
        where = hosts.as_hostlist([one.label for one in reached]) or "no host reached"
        raise CliError(f"--sync: no process matches {targets.describe()} on {where}", EXIT_FAILED)
    rate = max((_rate(o, now) for o in first if o.answer is not None), default=0.0)
    slowest = max((o.seconds for o in (*first, *second) if o.state == fanout.EFFECTIVE), default=0.0)
    waves = -(-len(reached) // parallel)
    ahead_s = SYNC_MARGIN_S + STEP_LAG_S + extra_s + SYNC_ROUND_TRIPS * slowest * waves
    lead = max(min_lead, math.ceil(ahead_s * rate) + 1)  # + the step under way
    furthest = max(step for _, step in now.values())
    return StepSync(furthest + lead, furthest, rate, lead, slowest, len(now), reached, unreached)


def start_at_one_step(
    fleet: Sequence[Target], order: Order, parallel: int, quiet: bool = True
) -> SyncedStart:
    """A step-based *order* (``iterations`` > 0) started at one step on every host of *fleet*:
    :func:`sync_start_step`, its ``start_step`` set to that, sent (``send.start_on``). Where a daemon
    refused it as already passed (START_STEP_PASSED), the trace is cancelled on the hosts that took it
    and sent once more to all with a step twice as far ahead. Prints the step chosen unless *quiet*."""
    request = order.request
    pause_s = PAUSE_LEAD_S if getattr(request, "pause_monitor", False) else 0.0
    sync = sync_start_step(fleet, request.targets, parallel, extra_s=pause_s)
    sent, late = _send_at(sync, order, parallel, quiet)
    unreached = list(sync.unreached)
    if late:
        _cancel([o for o in sent if o.state == fanout.EFFECTIVE], sync.reached, parallel)
        sync = sync_start_step(sync.reached, request.targets, parallel, 2 * sync.lead_steps, pause_s)
        sent, still = _send_at(sync, order, parallel, quiet)
        unreached += sync.unreached
        if still and not quiet:
            print(
                f"dyno: --sync: start step {sync.start_step} had passed too on {hosts.as_hostlist(still)} "
                "(see the rows there): those hosts did not take the trace",
                file=sys.stderr,
            )
    return SyncedStart(fanout.merge(unreached, sent), sync, late)


def _send_at(
    sync: StepSync, order: Order, parallel: int, quiet: bool
) -> Tuple[List[fanout.Outcome], List[str]]:
    """*order* at *sync*'s step to the hosts it reached; the outcomes, and the hosts where a process
    had passed that step already."""
    if not quiet:
        print(
            f"start step: {sync.start_step} on {sync.processes} process(es) (the furthest at step "
            f"{sync.furthest_step}, {sync.steps_per_s:.1f} steps/s: {sync.lead_steps} steps ahead; "
            f"slowest round trip {sync.slowest_s * 1000:.0f} ms)",
            flush=True,
        )
    sent = start_on(sync.reached, order.at(start_step=sync.start_step), parallel)
    late = [o.host for o in sent if o.answer is not None and _passed(o.answer.response)]
    if late and not quiet:
        print(
            f"dyno: --sync: start step {sync.start_step} had passed on {hosts.as_hostlist(late)}",
            file=sys.stderr,
        )
    return sent, late


def _passed(response: CommandResponse) -> bool:
    return any(p.reason is Reason.START_STEP_PASSED for p in response.processes)


def _cancel(took: Sequence[fanout.Outcome], fleet: Sequence[Target], parallel: int) -> None:
    """Cancel the trace each host of *took* started, before it is sent again at a later step."""
    trace_ids = {o.host: o.answer.response.trace_id for o in took}

    def cancel(one: Target) -> Any:
        return Daemon(one, "dyno trace --cancel").cancel_trace(trace_ids[one.label])

    fanout.gather([one for one in fleet if one.label in trace_ids], cancel, parallel)


def _sample(target: Target, targets: Targets) -> _Sample:
    """The processes *targets* selects on *target*'s daemon, with their steps, and when they came."""
    processes = Daemon(target, "--sync").processes(targets)
    return _Sample(time.monotonic(), processes)


def _rate(first: fanout.Outcome, now: Dict[Tuple[str, int], Tuple[float, int]]) -> float:
    """The fastest step rate among *first*'s processes, from their steps in both samples."""
    rates = [0.0]
    for p in first.answer.processes:
        later = now.get((first.host, p.host_pid))
        if later is not None and later[0] > first.answer.at:
            rates.append(max(0, later[1] - p.current_step) / (later[0] - first.answer.at))
    return max(rates)


# --- one instant (time-based) -----------------------------------------------------------------------


def synchronise(
    target: Target, fleet: List[Target], request: Any
) -> Tuple[List[fanout.Outcome], List[Target], Any]:
    """The request's start at one instant far enough ahead for every host, measured from this fan-out's
    own round trips (GetStatus, the connection included, as the command's will be). Returns the hosts
    that could not be reached, the ones that can, and the request with its start time."""
    probes = fanout.gather(fleet, lambda one: Daemon(one, "--sync").status(), target.parallel)
    reached = [one for one, probe in zip(fleet, probes) if probe.state == fanout.EFFECTIVE]
    slowest = max((p.seconds for p in probes if p.state == fanout.EFFECTIVE), default=0.0)
    waves = -(-len(reached) // target.parallel)
    ahead = SYNC_MARGIN_S + SYNC_ROUND_TRIPS * slowest * waves
    start_ms = int((time.time() + ahead) * 1000)
    if reached and not target.json:
        print(
            f"profile start time: {start_ms} ({clock(start_ms / 1000)} here, {ahead:.2f}s ahead; "
            f"slowest round trip {slowest * 1000:.0f} ms)",
            flush=True,
        )
    unreached = [p for p in probes if p.state != fanout.EFFECTIVE]
    return unreached, reached, dataclasses.replace(request, profile_start_time_ms=start_ms)


def warn_if_late(start_ms: int) -> None:
    late_ms = time.time() * 1000 - start_ms
    if late_ms > 0:
        print(
            f"dyno: --sync: the last answer came {late_ms:.0f} ms after the start time: a host that took "
            "the command that late starts its trace at its next step instead",
            file=sys.stderr,
        )
