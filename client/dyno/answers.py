"""The daemon's answer to a command (``CommandResponse``): printed, as JSON, as table rows, judged —
on one host, or as rows of a fan-out's table (:data:`COMMAND_VIEW`).

What ``dyno nputrace``, ``gputrace`` and ``npu-monitor`` print when a command was sent.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional

from msmonitor_contract.vocabulary import CommandStatus, Reason

from .exits import CliError
from .fleet import fanout
from .fleet.target import Target
from .model.commands import CommandResponse, ProcessOutcome
from .model.traces import TraceInfo
from .output import as_dict, print_json, rank_text, table

NOT_TAKEN = "no process took the command"
COMMAND_HEADERS = ("COMMAND", "PID", "RANK", "STATUS", "OUTPUT / WHY")


def report_command(target: Target, response: CommandResponse) -> None:
    """Print a command's answer; a command no process took is a failure (exit 1)."""
    if target.json:
        print_json(command_json(response))
    else:
        print_response(response)
    if not response.effective:
        raise CliError(NOT_TAKEN)


def judge_command(response: CommandResponse) -> str:
    """Why a command was not effective on a host ("" when it was): the daemon's own words."""
    if response.effective:
        return ""
    return response.message or NOT_TAKEN


def command_json(response: CommandResponse, info: Optional[TraceInfo] = None) -> Dict[str, Any]:
    """The answer as JSON, with msMonitor's ``commandStatus`` key first (and the trace, when waited for)."""
    data: Dict[str, Any] = {
        "commandStatus": _status(response),
        **as_dict(response),
    }
    if info is not None:
        data["trace"] = as_dict(info)
    return data


def print_response(response: CommandResponse, flush: bool = False) -> None:
    print(f"commandStatus: {_status(response)}")
    print(response.message)
    if response.processes:
        print(table(COMMAND_HEADERS[1:], [_process_row(p) for p in response.processes]))
    if response.trace_id:
        print(f"Follow it: dyno trace {response.trace_id}")
    if flush:
        sys.stdout.flush()


def command_rows(response: CommandResponse, trace: bool = False) -> List[List[str]]:
    """The answer as rows under :data:`COMMAND_HEADERS` (with *trace*, the trace id second): one per
    process, or one saying why none took it."""
    first = [_status(response), *([response.trace_id or "-"] if trace else [])]
    rows = [[*first, *_process_row(p)] for p in response.processes]
    return rows or [[*first, "-", "-", _reason(response.reason), response.message]]


def _process_row(p: ProcessOutcome) -> List[str]:
    return [
        str(p.pid),
        rank_text(p.rank),
        "triggered" if p.triggered else _reason(p.reason),
        _taken(p) if p.triggered else p.detail,
    ]


def _taken(p: ProcessOutcome) -> str:
    """Where a process that took the command writes, and how it went (a paused monitor, say)."""
    if p.expected_output and p.detail:
        return f"{p.expected_output} ({p.detail})"
    return p.expected_output or p.detail


def _status(response: CommandResponse) -> str:
    status: Optional[CommandStatus] = response.command_status
    return status.value if status is not None else "unknown"


def _reason(reason: Optional[Reason]) -> str:
    return reason.name.lower() if reason is not None else "unspecified"


# How a command's answers print across hosts (dyno npu-monitor; trace commands add the trace id).
COMMAND_VIEW = fanout.View(COMMAND_HEADERS, command_rows, command_json, judge_command)
