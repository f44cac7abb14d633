"""What `dyno nputrace`, `dyno gputrace` and `dyno trace` share: targets, sending, printing, waiting."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import grpc
import typer

from dynoproto import dynolog_pb2 as pb
from dynoproto import validate

from ..connection import Target, connect
from ..exits import EXIT_FAILED, EXIT_USAGE, CliError
from ..output import as_dict, print_json, table

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
_STATUS = {pb.COMMAND_STATUS_EFFECTIVE: "effective", pb.COMMAND_STATUS_INEFFECTIVE: "ineffective"}


# Targeting options, the same in every command that reaches processes.
JOB_ID = typer.Option(0, "--job-id", help="only this job's processes (0: every job)")
PIDS = typer.Option("0", "--pids", help="comma-separated pids; a launcher's pid selects its workers")
RANK_LIST = typer.Option(None, "--rank-list", help="comma-separated ranks, e.g. 0,1")
PROCESS_LIMIT = typer.Option(
    0, "--process-limit", help="at most this many processes (default 0: every matched one; dynolog's is 3)"
)
WAIT_TIMEOUT = typer.Option(600.0, "--wait-timeout", help="seconds --wait waits at most")


def int_list(text: str, flag: str, zero_means_all: bool = False) -> List[int]:
    """``1,2,3`` as integers; msMonitor's ``0`` (or empty) means every process for --pids."""
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise CliError(f"{flag}: expected comma-separated integers, got {text!r}", EXIT_USAGE) from None
    too_big = [v for v in values if not -(2**31) <= v < 2**31]
    if too_big:
        raise CliError(f"{flag}: {too_big[0]} is not a pid or rank (at most {2**31 - 1})", EXIT_USAGE)
    return [] if zero_means_all and values in ([], [0]) else values


def targets(job_id: int, pids: str, rank_list: Optional[str], process_limit: int) -> pb.Targets:
    return pb.Targets(
        job_id=job_id,
        pids=int_list(pids, "--pids", zero_means_all=True),
        ranks=int_list(rank_list, "--rank-list") if rank_list else [],
        process_limit=process_limit,
    )


def absolute_log_file(target: Target, path: str) -> str:
    """Relative paths mean this directory only when the daemon is on this host."""
    if path.startswith("/") or target.hostname not in LOCAL_HOSTS:
        return path
    return os.path.abspath(path)


def check(errors: List[validate.FieldError]) -> None:
    if errors:
        raise CliError("; ".join(str(e) for e in errors), EXIT_USAGE)


def submit(
    target: Target, call: Callable[[Any], pb.CommandResponse], wait: bool, wait_timeout: float
) -> None:
    """Send a trace command, print the daemon's answer, optionally follow the trace to its end."""
    response: pb.CommandResponse = call(target.timeout)
    effective = response.command_status == pb.COMMAND_STATUS_EFFECTIVE
    if not target.json:
        print_response(response, flush=True)  # the answer first; progress follows while waiting
    info = watch(target, response.trace_id, wait_timeout, quiet=target.json) if effective and wait else None
    if target.json:
        print_json(command_json(response, info))
    elif info is not None:
        print_trace(info)
    if not effective or (info is not None and not _all_finished(info)):
        raise typer.Exit(EXIT_FAILED)


def report_command(target: Target, response: pb.CommandResponse) -> None:
    """Print a command's answer; exit 1 when it was ineffective."""
    if target.json:
        print_json(command_json(response))
    else:
        print_response(response)
    if response.command_status != pb.COMMAND_STATUS_EFFECTIVE:
        raise typer.Exit(EXIT_FAILED)


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
        rows = [
            [
                str(p.pid),
                rank_text(p.rank),
                "triggered" if p.triggered else pb.Reason.Name(p.reason).removeprefix("REASON_").lower(),
                (p.expected_output or p.detail) if p.triggered else p.detail,
            ]
            for p in response.processes
        ]
        print(table(("PID", "RANK", "STATUS", "OUTPUT / WHY"), rows))
    if response.trace_id:
        print(f"Follow it: dyno trace {response.trace_id}")
    if flush:
        sys.stdout.flush()


def watch(target: Target, trace_id: str, timeout: float, quiet: bool = False) -> pb.TraceInfo:
    """Follow a trace until every process finished or failed, or *timeout* passes."""
    deadline = time.monotonic() + timeout
    last: Optional[pb.TraceInfo] = None
    seen: Dict[int, int] = {}
    with connect(target) as stub:
        try:
            for info in stub.WatchTrace(pb.GetTraceRequest(trace_id=trace_id), timeout=timeout):
                last = info
                if not quiet:
                    _progress(info, seen)
                if info.done or time.monotonic() > deadline:
                    break
        except grpc.RpcError as exc:
            if not (isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            if not quiet:
                print(f"dyno: --wait-timeout: gave up after {timeout:.0f}s", file=sys.stderr)
    if last is None:
        raise CliError(f"the daemon has no trace {trace_id}", EXIT_FAILED)
    return last


def _progress(info: pb.TraceInfo, seen: Dict[int, int]) -> None:
    """One line per process each time its phase changes, so a long wait shows where it stands."""
    for p in info.processes:
        if seen.get(p.host_pid) != p.phase:
            seen[p.host_pid] = p.phase
            print(
                f"  pid {p.pid} (rank {rank_text(p.rank)}): {_phase(p.phase)}{_steps(p)}",
                file=sys.stderr,
                flush=True,
            )


def print_trace(info: pb.TraceInfo) -> None:
    print(f"trace {info.trace_id} ({info.kind}): {'done' if info.done else 'in progress'}")
    rows = [
        [
            str(p.pid),
            rank_text(p.rank),
            _phase(p.phase),
            _steps(p).strip(" ()"),
            p.error or ", ".join(p.files) or p.output,
        ]
        for p in info.processes
    ]
    print(table(("PID", "RANK", "PHASE", "STEPS", "FILES / ERROR"), rows))
    for p in info.processes:
        for warning in p.warnings:
            print(f"  warning (pid {p.pid}): {warning}")
        print(f"  pid {p.pid}: " + ", ".join(f"{_phase(h.phase)} {_clock(h.at)}" for h in p.history))


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


def rank_text(rank: int) -> str:
    return "-" if rank < 0 else str(rank)
