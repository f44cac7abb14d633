"""Starting a trace (``dyno nputrace``, ``gputrace``): the request checked and sent, the answer
printed, and with ``--wait`` the trace followed to its end and its files collected — on one host, or on
many (dyno.fleet.fanout), with ``--sync`` at one step (``--iterations``) or one instant on all.

Public for another client that traces many hosts (``dyno respond``): :func:`send`, :func:`start_on`,
:func:`follow`, :func:`sync_start_step` and :func:`start_at_one_step`. It loads gRPC and protobuf:
those commands import it inside ``run``.
"""

from __future__ import annotations

import math
import sys
import time
from argparse import Namespace
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Protocol, Sequence, Tuple, TypeVar

from dynoproto import dynolog_pb2 as pb
from msmonitor_contract.rules import FieldError

from ..answers import COMMAND_HEADERS, NOT_TAKEN, command_json, command_rows, judge_command, print_response
from ..cli import check_fields
from ..commands import status
from ..edge import legacy_commands
from ..edge.connection import connect
from ..edge.legacy import LegacyDaemon
from ..exits import EXIT_FAILED, EXIT_USAGE, CliError
from ..fleet import fanout, hosts
from ..fleet.target import Target, absolute_path
from ..output import print_json
from . import collect
from .progress import TRACE_HEADERS, all_finished, clock, print_trace, trace_rows, watch

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


def npu_trace_rpc(stub: Any) -> Callable[..., pb.CommandResponse]:
    """The Rpc of ``nputrace`` (what :func:`send` takes)."""
    return stub.NpuTrace


class Started(NamedTuple):
    """One host's answer to a trace command, and its trace as last seen when ``--wait`` followed it."""

    response: pb.CommandResponse
    info: Optional[pb.TraceInfo] = None


def start_trace(
    target: Target,
    args: Namespace,
    request: TraceRequest,
    errors: Callable[[TraceRequest], List[FieldError]],
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
    response = send(target, request, rpc, args).response
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
    errors: Callable[[TraceRequest], List[FieldError]],
    rpc: Rpc,
) -> None:
    """The trace on every host: one table of the answers; with ``--sync`` one start instant for all;
    with ``--wait`` every host's trace followed at once until its files are written."""
    check_fields(errors(request))  # the path as given: a relative one means nothing on the other hosts
    if args.sync:
        _check_sync(request)
    fleet = fanout.fleet(target)
    if args.sync and request.iterations > 0:
        synced = start_at_one_step(fleet, request, rpc, target.parallel, args, quiet=target.json)
        answered, fleet = synced.outcomes, synced.sync.reached
        view = _started_view({"start_step": synced.sync.start_step})
    else:
        probes, fleet = _synchronise(target, fleet, request) if args.sync else ([], fleet)
        sent = start_on(fleet, request, rpc, target.parallel, args)
        if args.sync:
            _warn_if_late(request.profile_start_time_ms)
        view = _started_view({"profile_start_time_ms": request.profile_start_time_ms} if args.sync else {})
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


def send(target: Target, request: Any, rpc: Rpc, args: Optional[Namespace] = None) -> Started:
    """*request* (a trace kind's, e.g. ``pb.NpuTraceRequest``) to one daemon by *rpc* (e.g.
    :func:`npu_trace_rpc`): its answer. A C++ daemon is sent its own request, without what it cannot
    do (*args*: the command's flags, for --wait and --collect it refuses). Raises CliError: the host
    unreachable, or a C++ daemon asked for what it cannot do."""
    try:
        with connect(target, "this trace") as stub:
            return Started(rpc(stub)(request, timeout=target.timeout))
    except LegacyDaemon as old:  # a C++ daemon: its own request, without what it cannot do
        if getattr(request, "pause_monitor", False):
            raise old.host.refusal("--pause-monitor") from None
        flags = args or Namespace(wait=False, collect=None)
        return Started(legacy_commands.trace(old.host, request, flags))


def start_on(
    fleet: Sequence[Target], request: Any, rpc: Rpc, parallel: int, args: Optional[Namespace] = None
) -> List[fanout.Outcome]:
    """*request* sent to every host of *fleet*, at most *parallel* at once: each host's outcome, in
    *fleet*'s order (its answer a :class:`Started`; effective when a process there took it)."""
    return fanout.gather(fleet, lambda one: send(one, request, rpc, args), parallel, judge)


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
        trace_id = answer.response.trace_id
        info = watch(one, trace_id, timeout, quiet=quiet, label=one.label)
        return answer._replace(info=info)

    return fanout.gather([one for one in fleet if one.label in started], follow_one, len(started), judge)


# --- one start step on every host (--sync --iterations) ---------------------------------------------


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
    processes: List[pb.ProcessInfo]


def sync_start_step(
    fleet: Sequence[Target],
    targets: pb.Targets,
    parallel: int,
    min_lead: int = SYNC_MIN_LEAD_STEPS,
    extra_s: float = 0.0,
) -> StepSync:
    """One start step for every process *targets* selects (job id, pids, ranks) on the hosts of
    *fleet*: every host's ListProcesses twice, STEP_SAMPLE_S apart (the step rate); the furthest step
    plus the steps the fastest process makes in SYNC_MARGIN_S + STEP_LAG_S + *extra_s* +
    SYNC_ROUND_TRIPS x the slowest round trip (per wave of *parallel* hosts), and at least *min_lead*.
    Raises CliError when no host reached has a matched process."""
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
        raise CliError(f"--sync: no process matches {_describe(targets)} on {where}", EXIT_FAILED)
    rate = max((_rate(o, now) for o in first if o.answer is not None), default=0.0)
    slowest = max((o.seconds for o in (*first, *second) if o.state == fanout.EFFECTIVE), default=0.0)
    waves = -(-len(reached) // parallel)
    ahead_s = SYNC_MARGIN_S + STEP_LAG_S + extra_s + SYNC_ROUND_TRIPS * slowest * waves
    lead = max(min_lead, math.ceil(ahead_s * rate) + 1)  # + the step under way
    furthest = max(step for _, step in now.values())
    return StepSync(furthest + lead, furthest, rate, lead, slowest, len(now), reached, unreached)


def start_at_one_step(
    fleet: Sequence[Target],
    request: Any,
    rpc: Rpc,
    parallel: int,
    args: Optional[Namespace] = None,
    quiet: bool = True,
) -> SyncedStart:
    """A step-based *request* (``iterations`` > 0) started at one step on every host of *fleet*:
    :func:`sync_start_step`, its ``start_step`` set to that, sent (:func:`start_on`). Where a daemon
    refused it as already passed (START_STEP_PASSED), the trace is cancelled on the hosts that took it
    and sent once more to all with a step twice as far ahead. Prints the step chosen unless *quiet*."""
    pause_s = PAUSE_LEAD_S if getattr(request, "pause_monitor", False) else 0.0
    sync = sync_start_step(fleet, request.targets, parallel, extra_s=pause_s)
    sent, late = _send_at(sync, request, rpc, parallel, args, quiet)
    unreached = list(sync.unreached)
    if late:
        _cancel([o for o in sent if o.state == fanout.EFFECTIVE], sync.reached, parallel)
        sync = sync_start_step(sync.reached, request.targets, parallel, 2 * sync.lead_steps, pause_s)
        sent, still = _send_at(sync, request, rpc, parallel, args, quiet)
        unreached += sync.unreached
        if still and not quiet:
            print(
                f"dyno: --sync: start step {sync.start_step} had passed too on {hosts.as_hostlist(still)} "
                "(see the rows there): those hosts did not take the trace",
                file=sys.stderr,
            )
    return SyncedStart(fanout.merge(unreached, sent), sync, late)


def _send_at(
    sync: StepSync, request: Any, rpc: Rpc, parallel: int, args: Optional[Namespace], quiet: bool
) -> Tuple[List[fanout.Outcome], List[str]]:
    """*request* at *sync*'s step to the hosts it reached; the outcomes, and the hosts where a process
    had passed that step already."""
    request.start_step = sync.start_step
    if not quiet:
        print(
            f"start step: {sync.start_step} on {sync.processes} process(es) (the furthest at step "
            f"{sync.furthest_step}, {sync.steps_per_s:.1f} steps/s: {sync.lead_steps} steps ahead; "
            f"slowest round trip {sync.slowest_s * 1000:.0f} ms)",
            flush=True,
        )
    sent = start_on(sync.reached, request, rpc, parallel, args)
    late = [o.host for o in sent if o.answer is not None and _passed(o.answer.response)]
    if late and not quiet:
        print(
            f"dyno: --sync: start step {sync.start_step} had passed on {hosts.as_hostlist(late)}",
            file=sys.stderr,
        )
    return sent, late


def _passed(response: pb.CommandResponse) -> bool:
    return any(p.reason == pb.REASON_START_STEP_PASSED for p in response.processes)


def _cancel(took: Sequence[fanout.Outcome], fleet: Sequence[Target], parallel: int) -> None:
    """Cancel the trace each host of *took* started, before it is sent again at a later step."""
    trace_ids = {o.host: o.answer.response.trace_id for o in took}

    def cancel(one: Target) -> pb.TraceInfo:
        with connect(one, "dyno trace --cancel") as stub:
            request = pb.GetTraceRequest(trace_id=trace_ids[one.label])
            return stub.CancelTrace(request, timeout=one.timeout)

    fanout.gather([one for one in fleet if one.label in trace_ids], cancel, parallel)


def _sample(target: Target, targets: pb.Targets) -> _Sample:
    """The processes *targets* selects on *target*'s daemon, with their steps, and when they came."""
    with connect(target, "--sync") as stub:
        reply = stub.ListProcesses(pb.ListProcessesRequest(job_id=targets.job_id), timeout=target.timeout)
    return _Sample(time.monotonic(), [p for p in reply.processes if _selects(targets, p)])


def _selects(targets: pb.Targets, p: pb.ProcessInfo) -> bool:
    """The daemon's own targeting (dynolog.targeting.matches), on what ListProcesses tells: a pid
    selects the process (by either pid) and its descendants."""
    if targets.job_id and p.job_id != targets.job_id:
        return False
    if targets.pids and not set(targets.pids) & {p.pid, p.host_pid, *p.ancestors}:
        return False
    return not targets.ranks or p.rank in targets.ranks


def _rate(first: fanout.Outcome, now: Dict[Tuple[str, int], Tuple[float, int]]) -> float:
    """The fastest step rate among *first*'s processes, from their steps in both samples."""
    rates = [0.0]
    for p in first.answer.processes:
        later = now.get((first.host, p.host_pid))
        if later is not None and later[0] > first.answer.at:
            rates.append(max(0, later[1] - p.current_step) / (later[0] - first.answer.at))
    return max(rates)


def _describe(targets: pb.Targets) -> str:
    parts = [f"job {targets.job_id}"] if targets.job_id else []
    parts += [f"pids {','.join(map(str, targets.pids))}"] if targets.pids else []
    parts += [f"ranks {','.join(map(str, targets.ranks))}"] if targets.ranks else []
    return " and ".join(parts) or "the command"


def _check_sync(request: TraceRequest) -> None:
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


def _started_view(synced: Dict[str, int]) -> fanout.View:
    """*synced*: what --sync chose (the start time or step), added to each host's JSON."""

    def to_json(started: Started) -> Dict[str, Any]:
        return {**command_json(started.response, started.info), **synced}

    headers = (COMMAND_HEADERS[0], "TRACE ID", *COMMAND_HEADERS[1:])
    return fanout.View(headers, lambda s: command_rows(s.response, trace=True), to_json, judge)


def judge(started: Started) -> str:
    """Why one host's Started is not effective (no process took it, or not every process finished
    the trace it followed); "" when it is."""
    why = judge_command(started.response)
    if not why and started.info is not None and not all_finished(started.info):
        return f"trace {started.info.trace_id}: not every process finished it"
    return why
