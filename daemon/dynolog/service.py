"""The gRPC servicer: answers `dyno` from the registry and the IPC counters."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import socket
import time
from typing import AsyncIterator, List, Optional, Sequence, Tuple

import grpc

from dynoproto import API, validate
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc

from . import __version__, auth, fetch, targeting
from .dispatch import IpcDispatcher
from .edge import command_response, msmonitor_status, process_info, trace_info
from .kinds.dynamic import Holds
from .node import Node
from .paths import check_output_path
from .registry import ClientKind, ProcessRecord
from .sessions import DynamicSession
from .traces import Trace


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
        if self._node is not None:
            response.dropped.update(self._node.drops.snapshot())
        if self._ipc is not None:
            response.ipc_addresses.extend(e.describe() for e in self._ipc.endpoints)
            c = self._ipc.counters
            response.ipc.CopyFrom(
                pb.IpcCounters(
                    received=c.received,
                    handled=c.handled,
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
        holds = self._node.holds if self._node is not None else None
        return pb.ListProcessesResponse(
            processes=[process_info(r, _held_by(holds, r.host_pid)) for r in records]
        )

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
            info = trace_info(trace)
            yield info
            # What was sent decides: the trace may end while the message goes out, and then the next
            # round sends its final state.
            if info.done:
                return
            # Stock Kineto reports nothing: its file is looked for at each wake-up, at least every second.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(updated.wait(), timeout=1.0)

    async def FetchTraceFiles(
        self, request: pb.GetTraceRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.FileChunk]:
        """The files the trace's processes wrote, in chunks (see dynolog.fetch for which are served)."""
        node, trace = await self._find(request, context)
        node.kineto.refresh(trace)
        async for chunk in fetch.chunks(trace, self._trace_roots, socket.gethostname()):
            yield chunk

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

    async def Dynamic(
        self, request_iterator: AsyncIterator[pb.DynamicRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.DynamicReply]:
        """A ``dyno dynamic`` session: its first request attaches, the stream's life is the hold."""
        requests = request_iterator.__aiter__()
        try:
            first: Optional[pb.DynamicRequest] = await requests.__anext__()
        except StopAsyncIteration:
            first = None
        if first is None or first.action != pb.DYNAMIC_ACTION_ATTACH:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a dynamic session begins with an attach")
        assert first is not None
        node = await self._accept(
            context, validate.dynamic_attach(first.attach), first.attach.output, "--output"
        )
        session = DynamicSession(node, first.attach, *_controller(context, first.attach.client))
        async for reply in session.run(first.seq, requests):
            yield reply

    async def ListIncidents(
        self, request: pb.ListIncidentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListIncidentsResponse:
        node = await self._require_ipc(context)
        incidents = node.incidents.list(request.job_id, request.limit)
        return pb.ListIncidentsResponse(incidents=[i.to_proto() for i in incidents])

    async def GetIncident(
        self, request: pb.GetIncidentRequest, context: grpc.aio.ServicerContext
    ) -> pb.IncidentInfo:
        node = await self._require_ipc(context)
        incident = node.incidents.get(request.id)
        if incident is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no incident {request.id} on this daemon")
        assert incident is not None
        return incident.to_proto()

    async def _accept(
        self,
        context: grpc.aio.ServicerContext,
        errors: List[validate.FieldError],
        log_file: str,
        flag: str = "--log-file",
    ) -> Node:
        """Validate again what the CLI validated (other clients exist); commands need the IPC."""
        messages = [str(e) for e in errors]
        outside = check_output_path(log_file, self._trace_roots, flag) if log_file else None
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


def _held_by(holds: Optional[Holds], host_pid: int) -> str:
    hold = holds.of(host_pid) if holds is not None else None
    return hold.describe() if hold is not None else ""


def _controller(context: grpc.aio.ServicerContext, client: pb.DynamicClient) -> Tuple[str, str]:
    """Who holds the processes, as a second controller is told: the certificate's name when there is
    one (verified), else the user the client says it runs as; and which dyno, from where."""
    peer = auth.peer_of(context.auth_context())
    holder = (
        f"'{peer.common_name}' (certificate)"
        if peer is not None
        else f"{client.user or 'an unnamed user'} (uid {client.uid}, as its dyno says)"
    )
    return holder, f"dyno pid {client.pid} on {client.hostname or context.peer()}"
