"""What the daemon keeps about this node's processes, and the parts that act on it, built once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from .core.delivery import Delivery
from .core.drops import Drops
from .core.model import MsMonitorStatus
from .core.pipeline import CommandPipeline, Policy
from .core.registry import ProcessRecord, Registry
from .core.traces import Trace, TraceStore
from .incidents.watch import IncidentSettings, IncidentWatch, TraceParts
from .ipc.clients.kineto import KinetoClient
from .ipc.clients.msmonitor import MsMonitorClient
from .ipc.clients.plugin import PluginClient
from .kinds import cancel, command_policies
from .kinds.dynamic import DynamicAttach, DynamicWindow, Holds
from .kinds.npumonitor import NpuMonitor
from .kinds.nputrace import NpuTrace
from .kinds.pause import MonitorPause
from .kinds.tracing import TracePolicy
from .monitoring.metrics import Metrics
from .monitoring.sinks import Sinks
from .monitoring.sinks.prometheus import PrometheusSink
from .session.dynamic import SessionDeps


@dataclass
class Node:
    registry: Registry
    traces: TraceStore
    delivery: Delivery
    pipeline: CommandPipeline
    commands: Dict[str, Policy[Any]]  # by RPC: every kind dyno sends with an RPC of its own
    nputrace: NpuTrace  # the two incidents drive
    npumonitor: NpuMonitor
    plugin: PluginClient
    kineto: KinetoClient
    msmonitor: MsMonitorClient
    metrics: Metrics
    drops: Drops
    holds: Holds
    dynamic_attach: DynamicAttach
    dynamic_window: DynamicWindow
    incidents: IncidentWatch
    # Told when a process leaves (incident detection, the `dyno dynamic` sessions that hold it).
    gone_listeners: List[Callable[[ProcessRecord, str], None]] = field(default_factory=list)

    @classmethod
    def build(
        cls, keepalive_s: float, sinks: Optional[Sinks] = None, incidents: Optional[IncidentSettings] = None
    ) -> Node:
        registry, traces, delivery, holds = Registry(keepalive_s), TraceStore(), Delivery(), Holds()
        drops = Drops()
        pipeline = CommandPipeline(registry, traces)
        commands = {policy.rpc: policy.for_node(traces, delivery) for policy in command_policies()}
        nputrace, npumonitor = commands[NpuTrace.rpc], commands[NpuMonitor.rpc]
        assert isinstance(nputrace, NpuTrace) and isinstance(npumonitor, NpuMonitor)
        pipeline.pausing = MonitorPause(pipeline, npumonitor, nputrace, traces)  # nputrace --pause-monitor
        metrics = Metrics(registry, drops, sinks)
        parts = TraceParts(pipeline, npumonitor, nputrace, traces)
        watch = IncidentWatch(incidents or IncidentSettings(), parts, metrics)
        metrics.report_listeners.append(watch.report)
        for sink in sinks.sinks if sinks else ():
            if isinstance(sink, PrometheusSink):
                sink.daemon_incidents = watch.counts
        return cls(
            registry=registry,
            traces=traces,
            delivery=delivery,
            pipeline=pipeline,
            commands=commands,
            nputrace=nputrace,
            npumonitor=npumonitor,
            plugin=PluginClient(registry, traces, delivery),
            kineto=KinetoClient(traces),
            msmonitor=MsMonitorClient(registry, traces),
            metrics=metrics,
            drops=drops,
            holds=holds,
            dynamic_attach=DynamicAttach(holds),
            dynamic_window=DynamicWindow(traces, delivery, holds),
            incidents=watch,
            gone_listeners=[watch.gone],
        )

    def session_deps(self) -> SessionDeps:
        """What a ``dyno dynamic`` session works with."""
        return SessionDeps(
            self.pipeline,
            self.dynamic_attach,
            self.dynamic_window,
            self.registry,
            self.traces,
            self.holds,
            self.delivery,
            self.gone_listeners,
            self.nputrace.hostname,
        )

    async def cancel(self, trace: Trace) -> None:
        """Cancel *trace* with its kind's stop (see :mod:`.cancel`)."""
        policies = [*self.commands.values(), self.dynamic_window]
        policy = next(p for p in policies if isinstance(p, TracePolicy) and p.kind is trace.kind)
        await cancel.cancel(trace, policy.stop_text(), self.registry, self.traces, self.delivery)

    def process_gone(self, record: ProcessRecord, why: str) -> None:
        """The process left: its trace fails, its reports and its socket are forgotten."""
        self.traces.fail(
            record.host_pid, f"the process {why} at step {record.current_step} before the trace finished"
        )
        self.metrics.forget(record)
        self.delivery.forget(record.host_pid)
        self.npumonitor.forget(record.host_pid)
        for listener in list(self.gone_listeners):
            listener(record, why)
        self.holds.forget(record.host_pid)

    def close(self) -> None:
        self.metrics.close()
        self.incidents.close()


def msmonitor_status(node: Optional[Node]) -> MsMonitorStatus:
    """msMonitor's getStatus over the node's processes, as both edges answer it (none without the IPC)."""
    records = list(node.registry) if node is not None else []
    slots = [node.traces.slot_of(r) for r in records] if node is not None else []
    return MsMonitorStatus.of(records, slots)
