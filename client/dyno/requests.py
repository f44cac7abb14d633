"""Sending a command to processes, printing the daemon's answer, following a trace to its end.

What ``dyno nputrace``, ``gputrace``, ``npu-monitor`` and ``trace`` share. It loads gRPC and protobuf:
those commands import it inside ``run``.
"""

from __future__ import annotations

import os
import sys
import time
from argparse import Namespace
from typing import Any, Callable, Dict, List, Optional, TypeVar

import grpc

from dynoproto import dynolog_pb2 as pb
from dynoproto import validate

from .connection import connect
from .exits import EXIT_FAILED, EXIT_USAGE, CliError
from .output import as_dict, print_json, rank_text, table
from .target import Target

NOT_TAKEN = "no process took the command"
_NO_MATCH = (pb.REASON_NO_PROCESS_MATCHED, pb.REASON_NO_PROCESS_REGISTERED)
_STATUS = {pb.COMMAND_STATUS_EFFECTIVE: "effective", pb.COMMAND_STATUS_INEFFECTIVE: "ineffective"}
TraceRequest = TypeVar("TraceRequest", pb.NpuTraceRequest, pb.GpuTraceRequest)


def start_trace(
    target: Target,
    args: Namespace,
    request: TraceRequest,
    errors: Callable[[TraceRequest], List[validate.FieldError]],
    rpc: Callable[[Any], Callable[..., pb.CommandResponse]],
    no_match_ok: bool = False,
) -> None:
    """Check and send a trace request (``rpc`` picks the stub's method), print the answer, and with
    ``--wait`` follow the trace until every process wrote its files. *no_match_ok*: no process matched
    (or none registered) is not a failure, as dynolog's gputrace without ``--fail-on-no-process``."""
    request.log_file = absolute_log_file(target, request.log_file)
    check(errors(request))
    with connect(target) as stub:
        response = rpc(stub)(request, timeout=target.timeout)
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
    if not taken and not (no_match_ok and response.reason in _NO_MATCH):
        raise CliError(NOT_TAKEN)
    if info is not None and not _all_finished(info):
        raise CliError(f"trace {info.trace_id}: not every process finished it")


def report_command(target: Target, response: pb.CommandResponse) -> None:
    """Print a command's answer; a command no process took is a failure (exit 1)."""
    if target.json:
        print_json(command_json(response))
    else:
        print_response(response)
    if response.command_status != pb.COMMAND_STATUS_EFFECTIVE:
        raise CliError(NOT_TAKEN)


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
