"""Sending a command to processes, printing the daemon's answer, following a trace to its end — on one
host, or on many (dyno.fanout).

What ``dyno nputrace``, ``gputrace``, ``npu-monitor`` and ``trace`` share. It loads gRPC and protobuf:
those commands import it inside ``run``.
"""

from __future__ import annotations

import os
import sys
import time
from argparse import Namespace
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, TypeVar

import grpc

from dynoproto import dynolog_pb2 as pb
from dynoproto import validate

from . import collect, fanout
from .commands import status
from .connection import connect
from .exits import EXIT_FAILED, EXIT_USAGE, CliError
from .output import as_dict, print_json, rank_text, table
from .target import Target

NOT_TAKEN = "no process took the command"
_NO_MATCH = (pb.REASON_NO_PROCESS_MATCHED, pb.REASON_NO_PROCESS_REGISTERED)
_STATUS = {pb.COMMAND_STATUS_EFFECTIVE: "effective", pb.COMMAND_STATUS_INEFFECTIVE: "ineffective"}
TraceRequest = TypeVar("TraceRequest", pb.NpuTraceRequest, pb.GpuTraceRequest)
Rpc = Callable[[Any], Callable[..., pb.CommandResponse]]  # picks the stub's method
COMMAND_HEADERS = ("COMMAND", "PID", "RANK", "STATUS", "OUTPUT / WHY")
TRACE_HEADERS = ("PID", "RANK", "PHASE", "STEPS", "FILES / ERROR")
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
    request.log_file = absolute_log_file(target, request.log_file)
    check(errors(request))
    response = _send(target, request, rpc).response
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
    if info is not None and not _all_finished(info):
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
    check(errors(request))  # the path as given: a relative one means nothing on the other hosts
    if args.sync:
        _check_sync(request)
    fleet = fanout.fleet(target)
    probes, fleet = _synchronise(target, fleet, request) if args.sync else ([], fleet)
    sent = fanout.gather(fleet, lambda one: _send(one, request, rpc), target.parallel, _judge)
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


def _send(target: Target, request: Any, rpc: Rpc) -> Started:
    with connect(target) as stub:
        return Started(rpc(stub)(request, timeout=target.timeout))


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
            f"profile start time: {start_ms} ({_clock(start_ms / 1000)} here, {ahead:.2f}s ahead; "
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
    if not why and started.info is not None and not _all_finished(started.info):
        return f"trace {started.info.trace_id}: not every process finished it"
    return why


def report_command(target: Target, response: pb.CommandResponse) -> None:
    """Print a command's answer; a command no process took is a failure (exit 1)."""
    if target.json:
        print_json(command_json(response))
    else:
        print_response(response)
    if response.command_status != pb.COMMAND_STATUS_EFFECTIVE:
        raise CliError(NOT_TAKEN)


def judge_command(response: pb.CommandResponse) -> str:
    """Why a command was not effective on a host ("" when it was): the daemon's own words."""
    if response.command_status == pb.COMMAND_STATUS_EFFECTIVE:
        return ""
    return response.message or NOT_TAKEN


def absolute_log_file(target: Target, path: str) -> str:
    """Relative paths mean this directory only when the daemon is on this host."""
    if not path or path.startswith("/") or not target.local:
        return path
    return os.path.abspath(path)


def check(errors: List[validate.FieldError]) -> None:
    if errors:
        raise CliError("; ".join(str(e) for e in errors), EXIT_USAGE)


def command_json(response: pb.CommandResponse, info: Optional[pb.TraceInfo] = None) -> Dict[str, Any]:
    """The answer as JSON, with msMonitor's ``commandStatus`` key first (and the trace, when waited for)."""
    data: Dict[str, Any] = {
        "commandStatus": _STATUS.get(response.command_status, "unknown"),
        **as_dict(response),
    }
    if info is not None:
        data["trace"] = as_dict(info)
    return data


def print_response(response: pb.CommandResponse, flush: bool = False) -> None:
    print(f"commandStatus: {_STATUS.get(response.command_status, 'unknown')}")
    print(response.message)
    if response.processes:
        print(table(COMMAND_HEADERS[1:], [_process_row(p) for p in response.processes]))
    if response.trace_id:
        print(f"Follow it: dyno trace {response.trace_id}")
    if flush:
        sys.stdout.flush()


def command_rows(response: pb.CommandResponse, trace: bool = False) -> List[List[str]]:
    """The answer as rows under :data:`COMMAND_HEADERS` (with *trace*, the trace id second): one per
    process, or one saying why none took it."""
    first = [_STATUS.get(response.command_status, "unknown"), *([response.trace_id or "-"] if trace else [])]
    rows = [[*first, *_process_row(p)] for p in response.processes]
    return rows or [[*first, "-", "-", _reason(response.reason), response.message]]


def _process_row(p: pb.ProcessOutcome) -> List[str]:
    return [
        str(p.pid),
        rank_text(p.rank),
        "triggered" if p.triggered else _reason(p.reason),
        (p.expected_output or p.detail) if p.triggered else p.detail,
    ]


def _reason(reason: int) -> str:
    return pb.Reason.Name(reason).removeprefix("REASON_").lower()


def watch(
    target: Target, trace_id: str, timeout: float, quiet: bool = False, label: str = ""
) -> pb.TraceInfo:
    """Follow a trace until every process finished or failed, or *timeout* passes. *label* names the
    host in progress lines, when several are followed at once."""
    deadline = time.monotonic() + timeout
    last: Optional[pb.TraceInfo] = None
    seen: Dict[int, int] = {}
    prefix = f"{label} " if label else ""
    with connect(target) as stub:
        try:
            for info in stub.WatchTrace(pb.GetTraceRequest(trace_id=trace_id), timeout=timeout):
                last = info
                if not quiet:
                    _progress(info, seen, prefix)
                if info.done or time.monotonic() > deadline:
                    break
        except grpc.RpcError as exc:
            if not (isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            if not quiet:
                print(f"dyno: {prefix}--wait-timeout: gave up after {timeout:.0f}s", file=sys.stderr)
    if last is None:
        raise CliError(f"the daemon has no trace {trace_id}", EXIT_FAILED)
    return last


def _progress(info: pb.TraceInfo, seen: Dict[int, int], prefix: str) -> None:
    """One line per process each time its phase changes, so a long wait shows where it stands. One
    write each: lines from hosts followed at once must not interleave."""
    for p in info.processes:
        if seen.get(p.host_pid) != p.phase:
            seen[p.host_pid] = p.phase
            line = f"  {prefix}pid {p.pid} (rank {rank_text(p.rank)}): {_phase(p.phase)}{_steps(p)}\n"
            sys.stderr.write(line)
            sys.stderr.flush()


def print_trace(info: pb.TraceInfo) -> None:
    print(f"trace {info.trace_id} ({info.kind}): {'done' if info.done else 'in progress'}")
    print(table(TRACE_HEADERS, trace_rows(info)))
    for p in info.processes:
        for warning in p.warnings:
            print(f"  warning (pid {p.pid}): {warning}")
        print(f"  pid {p.pid}: " + ", ".join(f"{_phase(h.phase)} {_clock(h.at)}" for h in p.history))


def trace_rows(info: Optional[pb.TraceInfo]) -> List[List[str]]:
    """Each process of the trace under :data:`TRACE_HEADERS`: its phase, steps, and files or error."""
    return [
        [
            str(p.pid),
            rank_text(p.rank),
            _phase(p.phase),
            _steps(p).strip(" ()"),
            p.error or ", ".join(p.files) or p.output,
        ]
        for p in (info.processes if info is not None else ())
    ]


def trace_failed(info: pb.TraceInfo) -> str:
    """What failed in the trace, or "" when no process failed it."""
    failed = [str(p.pid) for p in info.processes if p.phase == pb.TRACE_PHASE_FAILED]
    return f"trace {info.trace_id} failed in pid {', '.join(failed)}" if failed else ""


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


def _all_finished(info: pb.TraceInfo) -> bool:
    return info.done and all(p.phase == pb.TRACE_PHASE_FINISHED for p in info.processes)


def _phase(phase: int) -> str:
    return pb.TracePhase.Name(phase).removeprefix("TRACE_PHASE_").lower()


def _steps(p: pb.TraceProcess) -> str:
    if p.start_step >= 0 and p.stop_step > p.start_step:
        return f" (steps {p.start_step}-{p.stop_step - 1})"
    if p.start_step >= 0:
        return f" (from step {p.start_step})"
    return ""


# How a command's answers print across hosts (dyno npu-monitor; trace commands add the trace id).
COMMAND_VIEW = fanout.View(COMMAND_HEADERS, command_rows, command_json, judge_command)
