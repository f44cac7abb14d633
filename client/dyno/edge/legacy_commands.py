"""dyno's commands as a C++ dynolog or msMonitor daemon takes them (dyno.edge.legacy): status, version,
nputrace, gputrace and npu-monitor, each as the legacy request its own CLI sends, and each answer in
the shape this project's daemon gives, so it prints (one host, a fan-out's table, --json) as theirs.

The config text is what those CLIs write (reference: legacy-wire.md), from the plugin's key tables:
msMonitor's nputrace keys (always step-based), dynolog's gputrace keys, msMonitor's npu-monitor keys
(without this project's TOP_N). What the old daemons cannot do is refused per host, before sending.
"""

from __future__ import annotations

from argparse import Namespace
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Union

from dynoproto import dynolog_pb2 as pb
from dynoproto import legacy as wire
from dynoproto.convert import fields
from msmonitor_contract.kinds import GPUTRACE, NPUMONITOR, NPUTRACE
from msmonitor_contract.kinds.gputrace import kineto_output_file

from .legacy import MSMONITOR, LegacyHost


@dataclass(frozen=True)
class LegacyStatus:
    """What ``dyno status`` shows of a C++ daemon: which one, its version, its getStatus as it is."""

    flavor: str
    version: str
    tls: bool
    reply: Dict[str, Any]

    def get(self, key: str) -> str:
        return str(self.reply.get(key, "-"))


def status(host: LegacyHost) -> LegacyStatus:
    return LegacyStatus(host.flavor, version(host), host.target.tls, host.status)


def version(host: LegacyHost) -> str:
    return str(host.call(wire.call(wire.GET_VERSION)).get("version", "?"))


# --- commands -----------------------------------------------------------------------------------------


def trace(
    host: LegacyHost, request: Union[pb.NpuTraceRequest, pb.GpuTraceRequest], args: Namespace
) -> pb.CommandResponse:
    """nputrace or gputrace (by *request*'s type) as setKinetOnDemandRequest; --wait and --collect
    follow a trace by its id, which only this project's daemon gives."""
    for flag, given in (("--wait", args.wait), ("--collect", args.collect)):
        if given:
            raise host.refusal(flag)
    if isinstance(request, pb.NpuTraceRequest):
        return _set_config(host, request.targets, _nputrace_text(host, request), lambda pid: request.log_file)
    text = _gputrace_text(host, request)
    return _set_config(host, request.targets, text, lambda pid: kineto_output_file(request.log_file, pid))


def npu_monitor(host: LegacyHost, request: pb.NpuMonitorRequest, args: Namespace) -> pb.CommandResponse:
    for flag, given in (("--watch", args.watch), ("--auto-trace", args.auto_trace is not None)):
        if given:
            raise host.refusal(f"npu-monitor {flag}")
    _needs_msmonitor(host, "dyno npu-monitor")
    _no_ranks(host, request.targets)
    text = NPUMONITOR.render(NPUMONITOR.build(fields(request)), legacy=True)  # without our TOP_N
    return _set_config(host, request.targets, text, lambda pid: "")


def _nputrace_text(host: LegacyHost, request: pb.NpuTraceRequest) -> str:
    """msMonitor's 27 keys: its dyno takes --start-step and --iterations, so a trace is step-based."""
    _needs_msmonitor(host, "dyno nputrace")
    if request.iterations <= 0:
        raise host.refusal("a time-based nputrace (without --iterations)")
    return NPUTRACE.render(NPUTRACE.build(fields(request)), legacy=True)


def _gputrace_text(host: LegacyHost, request: pb.GpuTraceRequest) -> str:
    """dynolog's keys: iteration mode's three, or the time window's two; the memory profile's three."""
    _no_ranks(host, request.targets)
    return GPUTRACE.render(GPUTRACE.build(fields(request)), legacy=True)


def _needs_msmonitor(host: LegacyHost, feature: str) -> None:
    """The stock daemon hands any config to Kineto, which would run it as a trace of its own."""
    if host.flavor != MSMONITOR:
        raise host.refusal(feature, "msMonitor's daemon or this project's")


def _no_ranks(host: LegacyHost, targets: pb.Targets) -> None:
    if targets.ranks:
        raise host.refusal("--rank-list")


# --- the answer ---------------------------------------------------------------------------------------


def _set_config(
    host: LegacyHost, targets: pb.Targets, text: str, output: Callable[[int], str]
) -> pb.CommandResponse:
    """Send the command; the answer as this project's CommandResponse. The legacy CLIs' defaults stand
    for ours: every process is pids [0], no --process-limit is the stock daemon's own default."""
    body = wire.set_config(
        text, targets.job_id, list(targets.pids) or [0], targets.process_limit or wire.DEFAULT_PROCESS_LIMIT
    )
    return command_response(host, host.call(body), output)


def command_response(
    host: LegacyHost, reply: Dict[str, Any], output: Callable[[int], str]
) -> pb.CommandResponse:
    """Each matched process: triggered, or busy (a config already waits for it). Effective as the
    daemon says (msMonitor's commandStatus), or when a process was triggered (dynolog's)."""
    matched, triggered = _pids(reply, wire.MATCHED), _pids(reply, wire.ACTIVITY_TRIGGERED)
    said = reply.get(wire.COMMAND_STATUS)
    effective = said == wire.EFFECTIVE if said is not None else bool(triggered)
    response = pb.CommandResponse(
        command_status=pb.COMMAND_STATUS_EFFECTIVE if effective else pb.COMMAND_STATUS_INEFFECTIVE,
        message=_message(host, reply, matched, triggered),
        processes=[_process(pid, pid in triggered, output(pid)) for pid in matched],
        processes_matched=matched,
        activity_profilers_triggered=triggered,
        activity_profilers_busy=_int(reply, wire.ACTIVITY_BUSY),
        event_profilers_triggered=_pids(reply, wire.EVENT_TRIGGERED),
        event_profilers_busy=_int(reply, wire.EVENT_BUSY),
    )
    if not effective and not matched:
        response.reason = pb.REASON_NO_PROCESS_MATCHED
    return response


def _message(host: LegacyHost, reply: Dict[str, Any], matched: List[int], triggered: List[int]) -> str:
    who = f"{host.flavor}'s C++ daemon (legacy JSON RPC)"
    if wire.MATCHED not in reply and wire.COMMAND_STATUS not in reply:
        return f"{who} answered {wire.reply(reply).decode()}"
    if not matched:
        return f"{who}: no process matched (check --job-id and --pids)"
    return f"{who}: {len(matched)} process(es) matched, {len(triggered)} triggered"


def _process(pid: int, triggered: bool, output: str) -> pb.ProcessOutcome:
    if triggered:
        return pb.ProcessOutcome(pid=pid, host_pid=pid, rank=-1, triggered=True, expected_output=output)
    return pb.ProcessOutcome(
        pid=pid, host_pid=pid, rank=-1, reason=pb.REASON_TRACE_BUSY, detail="a command already waits for it"
    )


def _pids(reply: Dict[str, Any], key: str) -> List[int]:
    value = reply.get(key)
    return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []


def _int(reply: Dict[str, Any], key: str) -> int:
    value = reply.get(key)
    return value if isinstance(value, int) else 0
