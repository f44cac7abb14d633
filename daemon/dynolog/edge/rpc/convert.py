"""The gRPC edge: the proto's requests as the daemon's model (:mod:`dynolog.core.model`), and the model's
records, traces, outcomes, reports and incidents as the proto's messages and enums. Nothing else in the
daemon sees a protobuf message."""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any, Optional, Type, cast

from google.protobuf.message import Message

from dynoproto import dynolog_pb2 as pb
from dynoproto.convert import fields
from msmonitor_contract.kinds.dynamic import DYNAMIC
from msmonitor_contract.report import KindStat, NameStat, Report
from msmonitor_contract.targets import TARGETS, Targets
from msmonitor_contract.vocabulary import Reason, TracePhase

from ...core.model import CommandResult, MsMonitorStatus
from ...core.pipeline import Policy
from ...core.registry import ClientKind, ProcessRecord
from ...core.traces import ProcessTrace, Trace, TraceSlot
from ...incidents.incident import Incident
from ...session.messages import SessionAction, SessionPart, SessionProcess, SessionReply, SessionStep
from ..fetch import Piece

# --- requests, in ------------------------------------------------------------------------------------


def command(policy: Type[Policy[Any]], request: Message) -> Any:
    """A command kind's request as its model (the one its declaration makes)."""
    assert policy.declaration is not None, f"{policy.kind.value} is sent by no RPC of its own"
    return policy.declaration.build(fields(request))


def targets(message: pb.Targets) -> Targets:
    return TARGETS.build(fields(message))


def attach(message: pb.DynamicAttach) -> Any:
    return DYNAMIC.build(fields(message))


def session_step(request: pb.DynamicRequest) -> SessionStep:
    action = SessionAction(request.action) if request.action in _ACTIONS else SessionAction.NONE
    return SessionStep(request.seq, action, attach(request.attach) if request.HasField("attach") else None)


_ACTIONS = frozenset(a.value for a in SessionAction)

# --- answers, out ------------------------------------------------------------------------------------

_CLIENT_KINDS = {
    ClientKind.PLUGIN: pb.CLIENT_KIND_PLUGIN,
    ClientKind.KINETO: pb.CLIENT_KIND_KINETO,
    ClientKind.MSMONITOR: pb.CLIENT_KIND_MSMONITOR,
}


def proto_reason(reason: Optional[Reason]) -> pb.Reason:
    if reason is None:
        return pb.REASON_UNSPECIFIED
    return cast(pb.Reason, pb.Reason.Value(f"REASON_{reason.name}"))


def trace_info(trace: Trace) -> pb.TraceInfo:
    return pb.TraceInfo(
        trace_id=trace.trace_id,
        kind=trace.kind.value,
        created_at=trace.created_at,
        processes=[trace_process(p) for p in trace.processes.values()],
        done=trace.done,
    )


def trace_summary(trace: Trace) -> pb.TraceSummary:
    processes = trace.processes.values()
    counts = collections.Counter(p.phase for p in processes)
    return pb.TraceSummary(
        trace_id=trace.trace_id,
        kind=trace.kind.value,
        created_at=trace.created_at,
        done=trace.done,
        phases=[
            pb.PhaseCount(phase=_phase(phase), processes=counts[phase])
            for phase in TracePhase
            if counts[phase]
        ],
        folders=sorted({p.root for p in processes if p.root}),
        files=sum(len(p.files) for p in processes),
        size_bytes=sum(p.size_bytes for p in processes),
    )


def trace_process(p: ProcessTrace) -> pb.TraceProcess:
    return pb.TraceProcess(
        pid=p.pid,
        host_pid=p.host_pid,
        rank=p.rank,
        phase=_phase(p.phase),
        start_step=p.start_step,
        stop_step=p.stop_step,
        current_step=p.current_step,
        output=p.output,
        files=p.files,
        error=p.error,
        warnings=p.warnings,
        updated_at=p.updated_at,
        history=[pb.PhaseChange(phase=_phase(phase), at=at) for phase, at in p.history],
    )


def _phase(phase: TracePhase) -> pb.TracePhase:
    return cast(pb.TracePhase, pb.TracePhase.Value(f"TRACE_PHASE_{phase.name}"))


def command_response(result: CommandResult) -> pb.CommandResponse:
    response = pb.CommandResponse(
        command_status=pb.COMMAND_STATUS_EFFECTIVE if result.effective else pb.COMMAND_STATUS_INEFFECTIVE,
        reason=proto_reason(result.reason),
        message=result.message,
        trace_id=result.trace_id,
    )
    for o in result.outcomes:
        response.processes.add(
            pid=o.record.pid,
            host_pid=o.record.host_pid,
            rank=o.record.rank,
            triggered=o.triggered,
            reason=proto_reason(o.reason),
            detail=o.detail,
            expected_output=o.expected_output,
        )
    # dynolog's own response fields, for its scripts.
    response.processes_matched.extend(o.record.pid for o in result.outcomes)
    response.activity_profilers_triggered.extend(o.record.pid for o in result.taken)
    response.activity_profilers_busy = sum(o.reason is Reason.TRACE_BUSY for o in result.outcomes)
    return response


def msmonitor_status(status: MsMonitorStatus) -> pb.MsMonitorStatus:
    return pb.MsMonitorStatus(**dataclasses.asdict(status))


def process_info(record: ProcessRecord, slot: TraceSlot, held_by: str = "") -> pb.ProcessInfo:
    return pb.ProcessInfo(
        pid=record.pid,
        host_pid=record.host_pid,
        ancestors=record.ancestors,
        job_id=record.job_id,
        rank=record.rank,
        local_rank=record.local_rank,
        world_size=record.world_size,
        devices=record.devices,
        backend=record.backend,
        clients=sorted(_CLIENT_KINDS[k] for k in record.clients),
        hostname=record.hostname,
        versions=record.versions,
        plugin_version=record.plugin_version,
        capabilities=record.capabilities,
        registered_at=record.registered_at,
        last_seen_s=max(0.0, time.monotonic() - record.last_seen),
        uid=record.uid,
        current_step=record.current_step,
        trace_state=f"TRACE_STATE_{slot.state.name}",
        monitor_state=f"MONITOR_STATE_{record.monitor_state.name}",
        held_by=held_by,
        service=record.service_profiler,
        helper_pids=sorted(record.helpers),
    )


def metrics_report(record: ProcessRecord, report: Report, hostname: str) -> pb.MetricsReport:
    return pb.MetricsReport(
        hostname=record.hostname or hostname,
        pid=record.pid,
        host_pid=record.host_pid,
        rank=record.rank,
        job_id=record.job_id,
        seq=report.seq,
        backend=report.backend,
        start_ns=report.start_ns,
        end_ns=report.end_ns,
        sampled_ns=report.sampled_ns,
        kinds=[_kind(k) for k in report.kinds],
        dropped=report.dropped,
        unavailable=report.unavailable,
        final=report.final,
    )


def _kind(k: KindStat) -> pb.KindStats:
    return pb.KindStats(
        kind=k.kind.label,
        device=k.device,
        count=k.count,
        total_ns=k.total_ns,
        min_ns=k.min_ns,
        max_ns=k.max_ns,
        mean_ns=k.mean_ns,
        distinct=k.distinct,
        top=[_name(n) for n in k.top],
        other=_name(k.other),
    )


def _name(n: NameStat) -> pb.NameStats:
    return pb.NameStats(
        name=n.name, domain=n.domain or "", count=n.count, total_ns=n.total_ns, mean_ns=n.mean_ns
    )


def incident_info(incident: Incident) -> pb.IncidentInfo:
    fields = {f.name: getattr(incident, f.name) for f in dataclasses.fields(incident) if f.name != "resume"}
    fields["figures"] = [pb.NameFigure(**dataclasses.asdict(f)) for f in incident.figures]
    fields["timeline"] = [pb.IncidentEvent(at=at, what=what) for at, what in incident.timeline]
    return pb.IncidentInfo(**fields)


def file_chunk(piece: Piece, host: str) -> pb.FileChunk:
    entry, p = piece.entry, piece.entry.process
    return pb.FileChunk(
        host=host,
        pid=p.pid,
        host_pid=p.host_pid,
        rank=p.rank,
        name=entry.name,
        path=entry.path,
        trace=entry.trace,
        error=piece.error,
        size=piece.size,
        offset=piece.offset,
        data=piece.data,
    )


def session_reply(reply: SessionReply) -> pb.DynamicReply:
    return pb.DynamicReply(
        seq=reply.seq,
        action=cast(pb.DynamicAction, reply.action.value),
        ok=reply.ok,
        processes=[_session_process(p) for p in reply.processes],
        window_id=reply.window_id,
        ended=reply.ended,
        commands_left=reply.commands_left,
        parts=[_session_part(part) for part in reply.parts],
    )


def _session_part(part: SessionPart) -> pb.SessionPart:
    fields = {f.name: getattr(part, f.name) for f in dataclasses.fields(part)}
    fields["news"] = cast(pb.SessionNews, part.news.value)
    fields["processes"] = [_session_process(p) for p in part.processes]
    return pb.SessionPart(**fields)


def _session_process(p: SessionProcess) -> pb.DynamicProcess:
    process = pb.DynamicProcess(
        pid=p.pid,
        host_pid=p.host_pid,
        rank=p.rank,
        ok=p.ok,
        detail=p.detail,
        step=p.step,
        backend=p.backend,
        new_warnings=p.new_warnings,
        collecting_s=p.collecting_s,
    )
    if p.window is not None:
        process.window.CopyFrom(trace_process(p.window))
        process.size_bytes = p.window.size_bytes
    return process
