"""npu-monitor on the daemon: commands out to processes, reports in, and on to watchers and sinks.

A command is decided per process like a trace (npu-monitor and nputrace exclude each other), pushed to
plugin processes or staged for msMonitor clients' next poll. Plugin processes answer with their
monitor state (and which kinds their backend cannot record); every interval they send a report, in
chunks, which the daemon reassembles, keeps as each process's latest, streams to `WatchMetrics` and
writes to the configured sinks. msMonitor's own ``data`` messages are accepted too.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import secrets
import socket
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from dynoproto import dynolog_pb2 as pb
from msmonitor_plugin import wire
from msmonitor_plugin.monitor.records import Kind
from msmonitor_plugin.monitor.report import ChunkAssembler, KindStat, NameStat, Report, ReportError

from . import configtext, targeting
from .registry import MonitorState, ProcessRecord, Registry, TraceState
from .sinks import ProcessLabels, Sinks, SinkWorker
from .tracing import Pusher, ineffective

log = logging.getLogger("dynolog.monitor")

NPUMONITOR = wire.NPUMONITOR
ANSWER_WAIT_S = 2.0  # how long a command waits for pushed processes to say what they did
MAX_PARTIAL_REPORTS = 4  # reports of one process being reassembled at once


def labels_of(record: ProcessRecord, hostname: str) -> ProcessLabels:
    return ProcessLabels(
        host=record.hostname or hostname, job=str(record.job_id), rank=record.rank, pid=record.pid
    )


class MonitorManager:
    def __init__(self, registry: Registry, push: Pusher, sinks: Optional[Sinks] = None) -> None:
        self.registry = registry
        self._push = push
        self._sinks = SinkWorker(sinks or Sinks([]))
        self._hostname = socket.gethostname()
        # host pid -> its latest report, converted for gRPC only when someone watches
        self._latest: Dict[int, Tuple[ProcessRecord, Report]] = {}
        self._assemblers: Dict[int, ChunkAssembler] = {}  # per host pid: a peer cannot pose as another
        self._watchers: Set[asyncio.Queue[pb.MetricsReport]] = set()
        self._answers: Dict[str, Dict[int, wire.MonitorEvent]] = {}
        self._answered = asyncio.Event()

    # --- commands ---------------------------------------------------------------------------------

    async def command(self, request: pb.NpuMonitorRequest) -> pb.CommandResponse:
        text = configtext.npu_monitor(request)
        if len(self.registry) == 0:
            return ineffective(pb.REASON_NO_PROCESS_REGISTERED, "no process is registered with this daemon")
        matched = targeting.select(self.registry, request.targets)
        if not matched:
            return ineffective(pb.REASON_NO_PROCESS_MATCHED, "no registered process matches the targets")
        command_id = secrets.token_hex(8)
        self._answers[command_id] = {}
        response = pb.CommandResponse()
        pushed: List[ProcessRecord] = []
        taken = 0
        for record in matched:
            outcome = pb.ProcessOutcome(pid=record.pid, host_pid=record.host_pid, rank=record.rank)
            reason = self._availability(record)
            if not reason and request.targets.process_limit and taken >= request.targets.process_limit:
                reason = pb.REASON_PROCESS_LIMIT
            if reason:
                outcome.reason, outcome.detail = reason, _REASONS[reason]
            else:
                taken += 1
                outcome.triggered = True
                if record.accepts_push:
                    command = wire.Command(kind=NPUMONITOR, trace_id=command_id, config=text)
                    self._push(record, wire.encode(wire.COMMAND, command.to_payload()))
                    pushed.append(record)
                else:
                    record.outbox = text
                    outcome.detail = "staged for the process's next poll"
            response.processes.append(outcome)
        try:
            await self._await_answers(command_id, pushed)
        finally:  # also when the client gives up meanwhile
            answers = self._answers.pop(command_id)
        self._fill_answers(response, answers)
        response.processes_matched.extend(r.pid for r in matched)
        response.activity_profilers_triggered.extend(p.pid for p in response.processes if p.triggered)
        return _conclude(response, request)

    def _availability(self, record: ProcessRecord) -> pb.Reason:
        if not record.can_run(NPUMONITOR):
            return pb.REASON_NOT_SUPPORTED
        if record.trace_state is TraceState.RUNNING:
            return pb.REASON_NPU_TRACE_RUNNING
        # msMonitor lets a monitor start while a trace waits for its step; but where the plugin runs
        # both, the monitor's profiler would stop the trace's from starting.
        if record.trace_state is TraceState.READY and record.can_run(wire.NPUTRACE) and record.accepts_push:
            return pb.REASON_NPU_TRACE_RUNNING
        if record.outbox is not None:
            return pb.REASON_TRACE_BUSY
        return pb.REASON_UNSPECIFIED

    async def _await_answers(self, command_id: str, pushed: List[ProcessRecord]) -> None:
        deadline = time.monotonic() + ANSWER_WAIT_S
        answers = self._answers[command_id]
        while len(answers) < len(pushed) and time.monotonic() < deadline:
            answered = self._answered
            try:
                await asyncio.wait_for(answered.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                return

    @staticmethod
    def _fill_answers(response: pb.CommandResponse, answers: Dict[int, wire.MonitorEvent]) -> None:
        for outcome in response.processes:
            event = answers.get(outcome.host_pid)
            if event is None:
                if outcome.triggered and not outcome.detail:
                    outcome.detail = "sent; no answer yet (see dyno npu-monitor --status)"
                continue
            if event.error:
                outcome.triggered, outcome.reason, outcome.detail = (
                    False,
                    pb.REASON_NOT_SUPPORTED,
                    event.error,
                )
                continue
            parts = [f"monitor {event.state}" + (f" ({event.backend} backend)" if event.backend else "")]
            parts += [f"{kind} unavailable: {why}" for kind, why in event.unavailable.items()]
            parts += event.warnings
            if event.output:
                parts.append(f"records to {event.output}")
            outcome.detail = "; ".join(parts)

    # --- what processes tell us -----------------------------------------------------------------

    def monitor_event(self, record: ProcessRecord, event: wire.MonitorEvent) -> None:
        record.monitor_state = (
            MonitorState.RUNNING if event.state == wire.MONITOR_RUNNING else MonitorState.IDLE
        )
        if event.reason:
            log.info("monitor of process %d stopped: %s", record.host_pid, event.reason)
        answers = self._answers.get(event.command_id)
        if answers is not None:
            answers[record.host_pid] = event
            self._answered.set()
            self._answered = asyncio.Event()

    def metrics_chunk(self, record: ProcessRecord, payload: bytes) -> None:
        """One chunk of a report; the report is published when all its parts arrived."""
        assembler = self._assemblers.setdefault(record.host_pid, ChunkAssembler(MAX_PARTIAL_REPORTS))
        try:
            report = assembler.add(payload)
        except (ReportError, KeyError, TypeError, ValueError) as exc:
            raise wire.WireError(f"metrics chunk: {exc!r}") from None
        if report is not None:
            self._publish(record, report)

    def data_message(self, record: ProcessRecord, payload: bytes) -> None:
        """msMonitor's ``data``: one kind's summed duration on one device (markers: per domain and name)."""
        try:
            d = json.loads(payload)
            kind, device, duration, stamp = (
                Kind.parse(d["kind"]),
                int(d["deviceId"]),
                int(d["duration"]),
                int(d["timestamp"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise wire.WireError(f"data message does not parse: {exc}") from None
        device = -1 if device >= 2**31 else device  # msMonitor sends the host as an unsigned -1
        top = [NameStat(str(d.get("name", kind.label)), 1, duration, d.get("domain"))]
        stat = KindStat(kind, device, 1, duration, duration, duration, top=top, distinct=1)
        self._publish(record, Report(0, record.pid, "msmonitor", stamp, stamp, 0, kinds=[stat]))

    def forget(self, record: ProcessRecord) -> None:
        self._latest.pop(record.host_pid, None)
        self._assemblers.pop(record.host_pid, None)
        self._sinks.forget(labels_of(record, self._hostname))

    # --- watchers -----------------------------------------------------------------------------------

    def watch(self, targets: pb.Targets, latest: bool) -> asyncio.Queue[pb.MetricsReport]:
        queue: asyncio.Queue[pb.MetricsReport] = asyncio.Queue(maxsize=1000)
        if latest:
            for record in targeting.select(self.registry, targets):
                kept = self._latest.get(record.host_pid)
                if kept is not None:
                    queue.put_nowait(to_proto(*kept, self._hostname))
        self._watchers.add(queue)
        return queue

    def unwatch(self, queue: asyncio.Queue[pb.MetricsReport]) -> None:
        self._watchers.discard(queue)

    def close(self) -> None:
        self._sinks.close()

    def _publish(self, record: ProcessRecord, report: Report) -> None:
        self._latest[record.host_pid] = (record, report)
        if self._watchers:
            message = to_proto(record, report, self._hostname)
            for queue in list(self._watchers):
                if queue.full():  # a watcher that does not read loses old reports, never the daemon's time
                    queue.get_nowait()
                queue.put_nowait(message)
        self._sinks.emit(labels_of(record, self._hostname), report)


def to_proto(record: ProcessRecord, report: Report, hostname: str) -> pb.MetricsReport:
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


_REASONS = {
    pb.REASON_NOT_SUPPORTED: "no client in this process runs npu-monitor (stock Kineto does not)",
    pb.REASON_NPU_TRACE_RUNNING: "an nputrace is running (or about to start) there",
    pb.REASON_TRACE_BUSY: "an earlier command has not been taken by the process yet",
    pb.REASON_PROCESS_LIMIT: "beyond --process-limit",
}


def _conclude(response: pb.CommandResponse, request: pb.NpuMonitorRequest) -> pb.CommandResponse:
    action = "start" if request.start else "stop" if request.stop else "change"
    taken = [p for p in response.processes if p.triggered]
    if taken:
        response.command_status = pb.COMMAND_STATUS_EFFECTIVE
        response.message = (
            f"npu-monitor {action} sent to {len(taken)} of {len(response.processes)} matched processes"
        )
        return response
    reasons: Any = collections.Counter(p.reason for p in response.processes)
    response.command_status = pb.COMMAND_STATUS_INEFFECTIVE
    response.reason = reasons.most_common(1)[0][0]
    response.message = f"no matched process can take npu-monitor {action}: " + response.processes[0].detail
    return response
