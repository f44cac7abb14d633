"""The gRPC servicer: each RPC validated, converted to the daemon's model (:mod:`.convert`), run, and
its answer converted back."""

from __future__ import annotations

import os
import platform
import socket
import time
from typing import Any, AsyncIterator, Awaitable, Callable, List, Optional, Sequence, Tuple, Type

import grpc
from google.protobuf.message import Message

from dynoproto import API
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from msmonitor_contract.kinds.dynamic import DYNAMIC
from msmonitor_contract.targets import check as check_targets

from ... import __version__
from ...core import targeting
from ...core.pipeline import Policy
from ...core.registry import ClientKind, ProcessRecord
from ...core.traces import LISTED_TRACES, MAX_TRACES, Trace, TraceSlot
from ...ipc.dispatch import IpcDispatcher
from ...kinds import command_policies
from ...kinds.dynamic import Holds
from ...node import Node, msmonitor_status
from ...session.dynamic import DynamicSession
from ...session.messages import SessionStep
from .. import admission, auth, fetch, monitor_files
from . import convert

CommandRpc = Callable[[Message, grpc.aio.ServicerContext], Awaitable[pb.CommandResponse]]


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

    def serve_on(self, server: grpc.aio.Server) -> None:
        for policy in command_policies():  # NpuTrace, GpuTrace, NpuMonitor: one RPC per command kind
            setattr(self, policy.rpc, self._command_rpc(policy))
        pb_grpc.add_DynologServicer_to_server(self, server)

    def _command_rpc(self, policy: Type[Policy[Any]]) -> CommandRpc:
        """The RPC of a command kind: converted to the kind's model, admitted (:mod:`..admission`), then
        through the pipeline."""

        async def rpc(request: Message, context: grpc.aio.ServicerContext) -> pb.CommandResponse:
            command: Any = convert.command(policy, request)
            kind = policy.declaration
            assert kind is not None
            node = await self._accept(context, admission.refusals(kind, command, self._trace_roots))
            return convert.command_response(await node.pipeline.run(node.commands[policy.rpc], command))

        return rpc

    def _records(self) -> List[Tuple[ProcessRecord, TraceSlot]]:
        """Every registered process, with its trace slot."""
        node = self._node
        return [(r, node.traces.slot_of(r)) for r in node.registry] if node is not None else []

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetStatusResponse:
        records = list(self._node.registry) if self._node is not None else []
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
            msmonitor=convert.msmonitor_status(msmonitor_status(self._node)),
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
        selects = _listed(request)
        processes = [(r, slot) for r, slot in self._records() if selects(r)]
        processes.sort(key=lambda p: (p[0].job_id, p[0].rank, p[0].host_pid))
        holds = self._node.holds if self._node is not None else None
        return pb.ListProcessesResponse(
            processes=[convert.process_info(r, slot, _held_by(holds, r.host_pid)) for r, slot in processes]
        )

    async def GetTrace(self, request: pb.GetTraceRequest, context: grpc.aio.ServicerContext) -> pb.TraceInfo:
        node, trace = await self._find(request, context)
        node.kineto.refresh(trace)
        return convert.trace_info(trace)

    async def ListTraces(
        self, request: pb.ListTracesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTracesResponse:
        if self._node is None:
            return pb.ListTracesResponse()
        limit = min(request.limit, MAX_TRACES) if request.limit > 0 else LISTED_TRACES
        traces = self._node.traces.recent(limit)
        for trace in traces:
            self._node.kineto.refresh(trace)
        return pb.ListTracesResponse(traces=[convert.trace_summary(t) for t in traces])

    async def WatchTrace(
        self, request: pb.GetTraceRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.TraceInfo]:
        """Every change of the trace, until it is done (or the client goes away)."""
        node, trace = await self._find(request, context)
        changes = trace.changes
        while True:
            seen = changes.version
            node.kineto.refresh(trace)
            info = convert.trace_info(trace)
            yield info
            # What was sent decides: the trace may end while the message goes out, and then the next
            # round sends its final state.
            if info.done:
                return
            await changes.since(seen)

    async def FetchTraceFiles(
        self, request: pb.GetTraceRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.FileChunk]:
        """The files the trace's processes wrote, in chunks (see dynolog.edge.fetch for which are served)."""
        node, trace = await self._find(request, context)
        node.kineto.refresh(trace)
        host = socket.gethostname()
        async for piece in fetch.chunks(fetch.entries(trace, self._trace_roots)):
            yield convert.file_chunk(piece, host)

    async def CancelTrace(
        self, request: pb.GetTraceRequest, context: grpc.aio.ServicerContext
    ) -> pb.TraceInfo:
        """Cancel the trace in every process still on it; the trace as it then stands."""
        node, trace = await self._find(request, context)
        await node.cancel(trace)
        node.kineto.refresh(trace)
        return convert.trace_info(trace)

    async def WatchMetrics(
        self, request: pb.WatchMetricsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.MetricsReport]:
        """Each matched process's reports as they arrive, until the client goes away."""
        node = await self._accept(context, [str(e) for e in check_targets(request)])
        targets = convert.targets(request.targets)
        queue = node.metrics.watch(targets, request.latest)
        try:
            while True:
                record, report = await queue.get()
                current = node.registry.get(record.host_pid)
                if current is None or targeting.matches(current, targets):
                    yield convert.metrics_report(record, report, node.metrics.hostname)
        finally:
            node.metrics.unwatch(queue)

    async def FetchMonitorFiles(
        self, request: pb.FetchMonitorFilesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.FileChunk]:
        """The files the selected processes' monitors wrote with --log-file, in chunks (see
        dynolog.edge.monitor_files for which are served)."""
        node = await self._accept(context, [str(e) for e in check_targets(request)])
        monitor = node.npumonitor
        outputs = monitor.outputs.select(convert.targets(request.targets))

        def writing(output: monitor_files.MonitorOutput) -> bool:
            return output.in_use(node.registry.get(output.host_pid))

        await monitor.stops_answered(outputs, writing)
        host = socket.gethostname()
        async for piece in fetch.chunks(monitor_files.entries(outputs, writing, self._trace_roots)):
            yield convert.file_chunk(piece, host)

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
        attach = convert.attach(first.attach)
        node = await self._accept(context, admission.refusals(DYNAMIC, attach, self._trace_roots))
        session = DynamicSession(node.session_deps(), attach, *_controller(context, attach.client))
        async for reply in session.run(first.seq, _steps(requests)):
            yield convert.session_reply(reply)

    async def ListIncidents(
        self, request: pb.ListIncidentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListIncidentsResponse:
        node = await self._require_ipc(context)
        incidents = node.incidents.list(request.job_id, request.limit)
        return pb.ListIncidentsResponse(incidents=[convert.incident_info(i) for i in incidents])

    async def GetIncident(
        self, request: pb.GetIncidentRequest, context: grpc.aio.ServicerContext
    ) -> pb.IncidentInfo:
        node = await self._require_ipc(context)
        incident = node.incidents.get(request.id)
        if incident is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no incident {request.id} on this daemon")
        assert incident is not None
        return convert.incident_info(incident)

    async def _accept(self, context: grpc.aio.ServicerContext, refusals: List[str]) -> Node:
        """Refuse what admission refused; commands need the IPC."""
        if refusals:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "; ".join(refusals))
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
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no trace {request.trace_id!r} on this daemon: `dyno trace` (no id) lists the ones it keeps",
            )
        assert trace is not None
        return node, trace


def _held_by(holds: Optional[Holds], host_pid: int) -> str:
    hold = holds.of(host_pid) if holds is not None else None
    return hold.describe() if hold is not None else ""


async def _steps(requests: AsyncIterator[pb.DynamicRequest]) -> AsyncIterator[SessionStep]:
    async for request in requests:
        yield convert.session_step(request)


def _controller(context: grpc.aio.ServicerContext, client: Any) -> Tuple[str, str]:
    """Who holds the processes, as a second controller is told: the certificate's name when there is
    one (verified), else the user the client says it runs as; and which dyno, from where."""
    peer = auth.peer_of(context.auth_context())
    holder = (
        f"'{peer.common_name}' (certificate)"
        if peer is not None
        else f"{client.user or 'an unnamed user'} (uid {client.uid}, as its dyno says)"
    )
    return holder, f"dyno pid {client.pid} on {client.hostname or context.peer()}"


def _listed(request: pb.ListProcessesRequest) -> Callable[[ProcessRecord], bool]:
    """Which processes ListProcesses lists: those its targets select, else those of its job (any job)."""
    if request.HasField("targets"):
        targets = convert.targets(request.targets)
        return lambda record: targeting.matches(record, targets)
    return lambda record: request.job_id in (0, record.job_id)
