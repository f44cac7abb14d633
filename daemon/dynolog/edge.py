"""The gRPC edge: this project's vocabulary (records, traces, outcomes) as the proto's messages and enums."""

from __future__ import annotations

import time
from typing import List, Optional, cast

from dynoproto import dynolog_pb2 as pb
from msmonitor_plugin.vocabulary import Reason, TracePhase

from .commands import CommandResult
from .registry import ClientKind, ProcessRecord
from .traces import ProcessTrace, Trace

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


def msmonitor_status(records: List[ProcessRecord]) -> pb.MsMonitorStatus:
    """msMonitor's getStatus: the most advanced state of any process, in msMonitor's words."""

    def summary(states: List[str]) -> str:
        return next((s for s in ("running", "ready", "idle") if s in states), "uninitialized").title()

    tracing = [r for r in records if r.trace_state.busy]
    start, stop = tracing[0].trace_steps if tracing else (-1, -1)
    return pb.MsMonitorStatus(
        nputrace=summary([r.trace_state.value for r in records]),
        npumonitor=summary([r.monitor_state.value for r in records]),
        current_step=max((r.current_step for r in records), default=0),
        start_step=start,
        stop_step=stop,
    )


def process_info(record: ProcessRecord, held_by: str = "") -> pb.ProcessInfo:
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
        trace_state=f"TRACE_STATE_{record.trace_state.name}",
        monitor_state=f"MONITOR_STATE_{record.monitor_state.name}",
        held_by=held_by,
        service=record.service,
        helper_pids=sorted(record.helpers),
    )
