"""The gRPC servicer: answers `dyno` from the registry and the IPC counters."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import socket
import time
from typing import AsyncIterator, List, Optional, Sequence, Tuple, cast

import grpc

from dynoproto import API, validate
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from msmonitor_plugin.vocabulary import Reason, TracePhase

from . import __version__, targeting
from .commands import CommandResult
from .dispatch import IpcDispatcher
from .node import Node
from .paths import check_output_path
from .registry import ClientKind, ProcessRecord
from .traces import ProcessTrace, Trace

_CLIENT_KINDS = {
    ClientKind.PLUGIN: pb.CLIENT_KIND_PLUGIN,
    ClientKind.KINETO: pb.CLIENT_KIND_KINETO,
    ClientKind.MSMONITOR: pb.CLIENT_KIND_MSMONITOR,
}


class DynologService(pb_grpc.DynologServicer):
    def __init__(
        self,
        node: Optional[Node],
        ipc: Optional[IpcDispatcher],
        tls: bool,
        trace_roots: Sequence[str] = (),
    ) -> None:
        self._node = node
        self._ipc = ipc
        self._tls = tls
        self._trace_roots = tuple(trace_roots)
        self._started = time.monotonic()

    def _records(self) -> List[ProcessRecord]:
        return list(self._node.registry) if self._node is not None else []

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetStatusResponse:
        records = self._records()
        response = pb.GetStatusResponse(
            hostname=socket.gethostname(),
            version=__version__,
            pid=os.getpid(),
            uptime_s=time.monotonic() - self._started,
            ipc_enabled=self._ipc is not None,
            processes=len(records),
            plugin_processes=sum(ClientKind.PLUGIN in r.clients for r in records),
            kineto_processes=sum(ClientKind.KINETO in r.clients for r in records),
            tls=self._tls,
            msmonitor=msmonitor_status(records),
        )
        if self._ipc is not None:
            response.ipc_addresses.extend(e.describe() for e in self._ipc.endpoints)
            c = self._ipc.counters
            response.ipc.CopyFrom(
                pb.IpcCounters(
                    received=c.received,
                    replied=c.replied,
                    malformed=c.malformed,
                    rejected_senders=c.rejected_senders,
                    send_errors=c.send_errors,
                )
            )
        return response

    async def GetVersion(
        self, request: pb.GetVersionRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetVersionResponse:
        return pb.GetVersionResponse(version=__version__, api=API, python=platform.python_version())

    async def ListProcesses(
        self, request: pb.ListProcessesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListProcessesResponse:
        records = [r for r in self._records() if request.job_id in (0, r.job_id)]
        records.sort(key=lambda r: (r.job_id, r.rank, r.host_pid))
        return pb.ListProcessesResponse(processes=[process_info(r) for r in records])

    async def NpuTrace(
        self, request: pb.NpuTraceRequest, context: grpc.aio.ServicerContext
    ) -> pb.CommandResponse:
        node = await self._accept(context, validate.npu_trace(request), request.log_file)
        return command_response(await node.pipeline.run(node.nputrace, request))

    async def GpuTrace(
        self, request: pb.GpuTraceRequest, context: grpc.aio.ServicerContext
    ) -> pb.CommandResponse:
        node = await self._accept(context, validate.gpu_trace(request), request.log_file)
        return command_response(await node.pipeline.run(node.gputrace, request))

    async def NpuMonitor(
        self, request: pb.NpuMonitorRequest, context: grpc.aio.ServicerContext
    ) -> pb.CommandResponse:
        node = await self._accept(context, validate.npu_monitor(request), request.log_file)
        return command_response(await node.pipeline.run(node.npumonitor, request))

    async def GetTrace(self, request: pb.GetTraceRequest, context: grpc.aio.ServicerContext) -> pb.TraceInfo:
        node, trace = await self._find(request, context)
        node.kineto.refresh(trace)
        return trace_info(trace)

    async def WatchTrace(
        self, request: pb.GetTraceRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.TraceInfo]:
        """Every change of the trace, until it is done (or the client goes away)."""
        node, trace = await self._find(request, context)
        while True:
            updated = trace.updated
            node.kineto.refresh(trace)
            yield trace_info(trace)
            if trace.done:
                return
            # Stock Kineto reports nothing: its file is looked for at each wake-up, at least every second.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(updated.wait(), timeout=1.0)

    async def WatchMetrics(
        self, request: pb.WatchMetricsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.MetricsReport]:
        """Each matched process's reports as they arrive, until the client goes away."""
        node = await self._require_ipc(context)
        queue = node.metrics.watch(request.targets, request.latest)
        try:
            while True:
                report = await queue.get()
                record = node.registry.get(report.host_pid)
                if record is None or targeting.matches(record, request.targets):
                    yield report
        finally:
            node.metrics.unwatch(queue)

    async def _accept(
        self, context: grpc.aio.ServicerContext, errors: List[validate.FieldError], log_file: str
    ) -> Node:
        """Validate again what the CLI validated (other clients exist); commands need the IPC."""
        messages = [str(e) for e in errors]
        outside = check_output_path(log_file, self._trace_roots, "--log-file") if log_file else None
        if outside:
            messages.append(outside)
        if messages:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "; ".join(messages))
        return await self._require_ipc(context)

    async def _require_ipc(self, context: grpc.aio.ServicerContext) -> Node:
        if self._node is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "this daemon runs without --enable-ipc-monitor: no process can register with it",
            )
        assert self._node is not None
        return self._node

    async def _find(
        self, request: pb.GetTraceRequest, context: grpc.aio.ServicerContext
    ) -> Tuple[Node, Trace]:
        node = await self._require_ipc(context)
        trace = node.traces.get(request.trace_id)
        if trace is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no trace {request.trace_id!r} on this daemon")
        assert trace is not None
        return node, trace


# --- the gRPC edge: this project's vocabulary as the proto's enums -----------------------------------


def proto_reason(reason: Optional[Reason]) -> pb.Reason:
    if reason is None:
        return pb.REASON_UNSPECIFIED
    return cast(pb.Reason, pb.Reason.Value(f"REASON_{reason.name}"))


def trace_info(trace: Trace) -> pb.TraceInfo:
    return pb.TraceInfo(
        trace_id=trace.trace_id,
        kind=trace.kind.value,
        created_at=trace.created_at,
        processes=[_trace_process(p) for p in trace.processes.values()],
        done=trace.done,
    )


def _trace_process(p: ProcessTrace) -> pb.TraceProcess:
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


def process_info(record: ProcessRecord) -> pb.ProcessInfo:
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
    )
