"""The gRPC edge: one daemon as every command talks to it, in the client's model (:mod:`dyno.model`) and
the kinds' requests (:mod:`msmonitor_contract.kinds`). The only module, with :mod:`.connection`, that
sees gRPC and the generated messages.

A call that fails the way a C++ daemon fails gRPC finds the daemon it is (:mod:`.legacy`); the calls a
C++ daemon can answer (status, version, the commands) are then asked in its own RPC, and the rest are
refused naming what needs this project's daemon. A server stream (:class:`Stream`) is read in a
``with`` block: on the main thread Ctrl-C cancels it, gRPC's own way out, and a stream given a deadline
may end at it instead of failing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generic,
    Iterator,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)

import grpc
from google.protobuf.message import Message

from dynoproto import dynolog_pb2 as pb
from dynoproto.convert import to_model, to_proto

from ..fleet.target import Target
from ..model.daemon import GetStatusResponse, GetVersionResponse, LegacyStatus, ProcessInfo

if TYPE_CHECKING:  # each method imports its own: a dataclass costs ~1 ms to make, and status needs few
    from msmonitor_contract.schema import Kind
    from msmonitor_contract.targets import Targets

    from ..model.commands import CommandResponse
    from ..model.dynamic import DynamicReply, DynamicRequest
    from ..model.monitoring import IncidentInfo, MetricsReport
    from ..model.traces import FileChunk, TraceInfo, TraceSummary
    from .legacy import LegacyHost
from . import connection
from .connection import LegacyDaemon

T = TypeVar("T")
_Model = TypeVar("_Model")


class Daemon:
    """One daemon, reached as *target* says; *feature* names what is being done, for the messages of a
    host that cannot do it (``dyno processes``, ``--wait``)."""

    def __init__(self, target: Target, feature: str) -> None:
        self.target = target
        self.feature = feature

    # --- what a C++ daemon answers too ---------------------------------------------------------------

    def status(self) -> Union[GetStatusResponse, LegacyStatus]:
        try:
            return self._call(GetStatusResponse, "GetStatus", pb.GetStatusRequest())
        except LegacyDaemon as old:
            from . import legacy_commands  # only for a C++ daemon's peer

            return legacy_commands.status(old.host)

    def version(self) -> GetVersionResponse:
        try:
            return self._call(GetVersionResponse, "GetVersion", pb.GetVersionRequest())
        except LegacyDaemon as old:
            from . import legacy_commands

            return legacy_commands.version(old.host)

    def command(self, kind: Kind, request: Any, needs: Sequence[str] = ()) -> CommandResponse:
        """A command of *kind* (its request model); a C++ daemon is sent its own request, refused first
        where it lacks what the command *needs* (``--wait``: flags that need this project's daemon)."""
        from ..model.commands import CommandResponse

        message = to_proto(getattr(pb, kind.name), request)
        try:
            return self._call(CommandResponse, kind.rpc, message)
        except LegacyDaemon as old:
            return self.legacy_command(old.host, kind, request, needs)

    @staticmethod
    def legacy_command(host: LegacyHost, kind: Kind, request: Any, needs: Sequence[str]) -> CommandResponse:
        for feature in needs:
            raise host.refusal(feature)
        from . import legacy_commands

        return legacy_commands.command(host, kind, request)

    # --- this project's daemon only ------------------------------------------------------------------

    def ping(self) -> None:
        """Raises CliError unless this project's daemon answers (a C++ one is refused, naming
        ``feature``)."""
        self._unary("GetStatus", pb.GetStatusRequest())

    def processes(self, targets: Optional[Targets] = None) -> Tuple[ProcessInfo, ...]:
        """The registered processes *targets* select (the daemon's own targeting), or every one."""
        request = pb.ListProcessesRequest()
        if targets is not None:
            request.job_id = targets.job_id
            request.targets.CopyFrom(to_proto(pb.Targets, targets))
        reply = self._unary("ListProcesses", request)
        return tuple(to_model(ProcessInfo, p) for p in reply.processes)

    def get_trace(self, trace_id: str) -> TraceInfo:
        from ..model.traces import TraceInfo

        return self._call(TraceInfo, "GetTrace", pb.GetTraceRequest(trace_id=trace_id))

    def cancel_trace(self, trace_id: str) -> TraceInfo:
        from ..model.traces import TraceInfo

        return self._call(TraceInfo, "CancelTrace", pb.GetTraceRequest(trace_id=trace_id))

    def list_traces(self, limit: int) -> Tuple[TraceSummary, ...]:
        from ..model.traces import TraceSummary

        reply = self._unary("ListTraces", pb.ListTracesRequest(limit=limit))
        return tuple(to_model(TraceSummary, t) for t in reply.traces)

    def list_incidents(self, job_id: int = 0, limit: int = 0) -> Tuple[IncidentInfo, ...]:
        from ..model.monitoring import IncidentInfo

        reply = self._unary("ListIncidents", pb.ListIncidentsRequest(job_id=job_id, limit=limit))
        return tuple(to_model(IncidentInfo, i) for i in reply.incidents)

    def get_incident(self, incident_id: int) -> IncidentInfo:
        from ..model.monitoring import IncidentInfo

        return self._call(IncidentInfo, "GetIncident", pb.GetIncidentRequest(id=incident_id))

    def watch_trace(self, trace_id: str, timeout: float) -> Stream[TraceInfo]:
        """Each change of the trace until it is done; ends at *timeout* (``timed_out``)."""
        from ..model.traces import TraceInfo

        request = pb.GetTraceRequest(trace_id=trace_id)
        return self._stream(
            TraceInfo, lambda stub: stub.WatchTrace(request, timeout=timeout), ends_at_deadline=True
        )

    def fetch_trace_files(self, trace_id: str, timeout: float) -> Stream[FileChunk]:
        from ..model.traces import FileChunk

        request = pb.GetTraceRequest(trace_id=trace_id)
        return self._stream(FileChunk, lambda stub: stub.FetchTraceFiles(request, timeout=timeout))

    def fetch_monitor_files(self, targets: Targets, timeout: float) -> Stream[FileChunk]:
        from ..model.traces import FileChunk

        request = pb.FetchMonitorFilesRequest(targets=to_proto(pb.Targets, targets))
        return self._stream(FileChunk, lambda stub: stub.FetchMonitorFiles(request, timeout=timeout))

    def watch_metrics(self, targets: Targets) -> Stream[MetricsReport]:
        """Every report of the processes *targets* select, each one's latest first; until cancelled."""
        from ..model.monitoring import MetricsReport

        request = pb.WatchMetricsRequest(targets=to_proto(pb.Targets, targets), latest=True)
        return self._stream(MetricsReport, lambda stub: stub.WatchMetrics(request))

    def dynamic(self, requests: Iterator[DynamicRequest]) -> Stream[DynamicReply]:
        """A ``dyno dynamic`` session: *requests* go out as they come, the replies come back. The caller
        handles Ctrl-C itself (the session's reader runs on a thread of its own)."""
        from ..model.dynamic import DynamicReply

        messages = (to_proto(pb.DynamicRequest, r) for r in requests)
        return self._stream(DynamicReply, lambda stub: stub.Dynamic(messages), interruptible=False)

    # --- the calls -----------------------------------------------------------------------------------

    def _unary(self, rpc: str, request: Message) -> Any:
        with connection.connect(self.target, self.feature) as stub:
            return getattr(stub, rpc)(request, timeout=self.target.timeout)

    def _call(self, model: Type[_Model], rpc: str, request: Message) -> _Model:
        return to_model(model, self._unary(rpc, request))

    def _stream(
        self,
        model: Type[T],
        open_call: Callable[[Any], Any],
        ends_at_deadline: bool = False,
        interruptible: bool = True,
    ) -> Stream[T]:
        return Stream(self, model, open_call, ends_at_deadline, interruptible)


def request_json(kind: Kind, request: Any) -> Dict[str, Any]:
    """*request* of *kind* as the proto3 JSON mapping writes its message (what ``dyno respond`` records
    of what it sent): fields at their zero left out, 64-bit integers as strings."""
    from google.protobuf.json_format import MessageToDict

    message = to_proto(getattr(pb, kind.name), request)
    return MessageToDict(message, preserving_proto_field_name=True)


class Stream(Generic[T]):
    """A server stream of *model* messages, read inside ``with``. After the loop, ``interrupted`` says
    Ctrl-C ended it (on the main thread, an interruptible stream's SIGINT cancels the call) and
    ``timed_out`` that its deadline did; any other failure is raised as the CliError it means."""

    def __init__(
        self,
        daemon: Daemon,
        model: Type[T],
        open_call: Callable[[Any], Any],
        ends_at_deadline: bool,
        interruptible: bool,
    ) -> None:
        self._daemon = daemon
        self._model = model
        self._open_call = open_call
        self._ends_at_deadline = ends_at_deadline
        self._interruptible = interruptible
        self._scope = contextlib.ExitStack()
        self._call: Any = None
        self.interrupted = False
        self.timed_out = False

    def __enter__(self) -> Stream[T]:
        self._started = time.monotonic()
        stub = self._scope.enter_context(connection.connect(self._daemon.target, self._daemon.feature))
        self._call = self._open_call(stub)
        if self._interruptible:
            self._scope.enter_context(_cancelled_on_interrupt(self))
        return self

    def __exit__(self, *exc: Any) -> None:
        self._scope.close()

    def __iter__(self) -> Iterator[T]:
        received = False
        try:
            for message in self._call:
                received = True
                yield to_model(self._model, message)
        except grpc.RpcError as exc:
            if self.interrupted:
                return
            if self._ends_at_deadline and _code(exc) is grpc.StatusCode.DEADLINE_EXCEEDED:
                self.timed_out = True
                return
            target, feature = self._daemon.target, self._daemon.feature
            if received:
                raise connection.rpc_error(target, exc) from None
            raise connection.failure(target, exc, feature, self._started) from None

    def cancel(self) -> bool:
        """Hang up: the daemon sees the client go; the loop ends."""
        return bool(self._call.cancel()) if self._call is not None else False


@contextlib.contextmanager
def _cancelled_on_interrupt(stream: Stream[Any]) -> Iterator[None]:
    """While in the block, SIGINT cancels *stream*: left to Python's default, it would raise
    KeyboardInterrupt wherever the main thread is, somewhere inside gRPC's wait for the next message
    (one demo run on a loaded machine saw a watch outlive its SIGINT)."""
    if threading.current_thread() is not threading.main_thread():
        # Only the main thread may set a handler, and signals reach only it: a host followed on a
        # fan-out's thread ends with the whole command (dyno.main's Ctrl-C).
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        stream.interrupted = True
        stream.cancel()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _code(exc: grpc.RpcError) -> Optional[grpc.StatusCode]:
    return exc.code() if isinstance(exc, grpc.Call) else None
