"""dyno's commands as a C++ dynolog or msMonitor daemon takes them (:mod:`.legacy`): status, version,
and each command kind those daemons take (its declaration says which: ``Kind.legacy``) as the legacy
request their own CLI sends, each answer in the client's model, so it prints (one host, a fan-out's
table, --json) as this project's daemon's does.

The config text is the kind's, as those CLIs write it (reference: legacy-wire.md): msMonitor's
nputrace keys (always step-based), dynolog's gputrace keys, msMonitor's npu-monitor keys (without this
project's TOP_N). A kind a C++ daemon does not take, and what it cannot do, are refused per host,
before sending: never sent as another kind.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from dynoproto import legacy as wire
from msmonitor_contract.kinds.gputrace import kineto_output_file
from msmonitor_contract.schema import Kind
from msmonitor_contract.vocabulary import CommandKind, CommandStatus, Reason

from ..model.commands import CommandResponse, ProcessOutcome
from ..model.daemon import GetVersionResponse, LegacyStatus
from .legacy import LegacyHost


def status(host: LegacyHost) -> LegacyStatus:
    return LegacyStatus(host.flavor, _version(host), host.target.tls, host.status)


def version(host: LegacyHost) -> GetVersionResponse:
    """A C++ daemon names its API as the legacy JSON RPC; it has no Python."""
    return GetVersionResponse(version=_version(host), api=f"legacy JSON RPC ({host.flavor})")


def _version(host: LegacyHost) -> str:
    return str(host.call(wire.call(wire.GET_VERSION)).get("version", "?"))


# --- commands -----------------------------------------------------------------------------------------


def command(host: LegacyHost, kind: Kind, request: Any) -> CommandResponse:
    """*request* of *kind* as setKinetOnDemandRequest, where the host's daemon takes the kind and all
    the request asks; the answer as the client's CommandResponse."""
    if host.flavor not in kind.legacy:
        raise host.refusal(f"dyno {kind.dyno}", _takers(kind))
    refusal = _REFUSALS[kind.command](request)
    if refusal:
        raise host.refusal(refusal)
    text = kind.render(request, legacy=True)
    return _set_config(host, request.targets, text, _OUTPUTS[kind.command](request))


def _takers(kind: Kind) -> str:
    """The daemons that take *kind*: "msMonitor's daemon or this project's"."""
    return (
        "".join(f"{name}'s daemon or " for name in kind.legacy)
        + "this project's"
        + ("" if kind.legacy else " daemon")
    )


def _nputrace(request: Any) -> Optional[str]:
    """msMonitor's dyno takes --start-step and --iterations: its trace is step-based."""
    if request.pause_monitor:
        return "--pause-monitor"
    return None if request.iterations > 0 else "a time-based nputrace (without --iterations)"


def _gputrace(request: Any) -> Optional[str]:
    return "--rank-list" if request.targets.ranks else None


def _npumonitor(request: Any) -> Optional[str]:
    if request.auto_trace is not None:
        return "npu-monitor --auto-trace"
    return "--rank-list" if request.targets.ranks else None


# What a C++ daemon cannot do of each kind it takes, and where each process writes.
_REFUSALS: Dict[CommandKind, Callable[[Any], Optional[str]]] = {
    CommandKind.NPUTRACE: _nputrace,
    CommandKind.GPUTRACE: _gputrace,
    CommandKind.NPUMONITOR: _npumonitor,
}
_OUTPUTS: Dict[CommandKind, Callable[[Any], Callable[[int], str]]] = {
    CommandKind.NPUTRACE: lambda request: lambda pid: request.log_file,
    CommandKind.GPUTRACE: lambda request: lambda pid: kineto_output_file(request.log_file, pid),
    CommandKind.NPUMONITOR: lambda request: lambda pid: "",
}


# --- the answer ---------------------------------------------------------------------------------------


def _set_config(host: LegacyHost, targets: Any, text: str, output: Callable[[int], str]) -> CommandResponse:
    """Send the command; the answer as this project's CommandResponse. The legacy CLIs' defaults stand
    for ours: every process is pids [0], no --process-limit is the stock daemon's own default."""
    body = wire.set_config(
        text, targets.job_id, list(targets.pids) or [0], targets.process_limit or wire.DEFAULT_PROCESS_LIMIT
    )
    return command_response(host, host.call(body), output)


def command_response(
    host: LegacyHost, reply: Dict[str, Any], output: Callable[[int], str]
) -> CommandResponse:
    """Each matched process: triggered, or busy (a config already waits for it). Effective as the
    daemon says (msMonitor's commandStatus), or when a process was triggered (dynolog's)."""
    matched, triggered = _pids(reply, wire.MATCHED), _pids(reply, wire.ACTIVITY_TRIGGERED)
    said = reply.get(wire.COMMAND_STATUS)
    effective = said == wire.EFFECTIVE if said is not None else bool(triggered)
    return CommandResponse(
        command_status=CommandStatus.EFFECTIVE if effective else CommandStatus.INEFFECTIVE,
        reason=Reason.NO_PROCESS_MATCHED if not effective and not matched else None,
        message=_message(host, reply, matched, triggered),
        processes=tuple(_process(pid, pid in triggered, output(pid)) for pid in matched),
        processes_matched=tuple(matched),
        activity_profilers_triggered=tuple(triggered),
        activity_profilers_busy=_int(reply, wire.ACTIVITY_BUSY),
        event_profilers_triggered=tuple(_pids(reply, wire.EVENT_TRIGGERED)),
        event_profilers_busy=_int(reply, wire.EVENT_BUSY),
    )


def _message(host: LegacyHost, reply: Dict[str, Any], matched: List[int], triggered: List[int]) -> str:
    who = f"{host.flavor}'s C++ daemon (legacy JSON RPC)"
    if wire.MATCHED not in reply and wire.COMMAND_STATUS not in reply:
        return f"{who} answered {wire.reply(reply).decode()}"
    if not matched:
        return f"{who}: no process matched (check --job-id and --pids)"
    return f"{who}: {len(matched)} process(es) matched, {len(triggered)} triggered"


def _process(pid: int, triggered: bool, output: str) -> ProcessOutcome:
    if triggered:
        return ProcessOutcome(pid=pid, host_pid=pid, rank=-1, triggered=True, expected_output=output)
    return ProcessOutcome(
        pid=pid, host_pid=pid, rank=-1, reason=Reason.TRACE_BUSY, detail="a command already waits for it"
    )


def _pids(reply: Dict[str, Any], key: str) -> List[int]:
    value = reply.get(key)
    return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []


def _int(reply: Dict[str, Any], key: str) -> int:
    value = reply.get(key)
    return value if isinstance(value, int) else 0
