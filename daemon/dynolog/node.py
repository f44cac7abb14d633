"""What the daemon keeps about this node's processes, and the parts that act on it, built once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional

from .clients.kineto import KinetoClient
from .clients.msmonitor import MsMonitorClient
from .clients.plugin import PluginClient
from .commands import CommandPipeline
from .delivery import Delivery
from .drops import Drops
from .kinds.dynamic import DynamicAttach, DynamicWindow, Holds
from .kinds.gputrace import GpuTrace
from .kinds.npumonitor import NpuMonitor
from .kinds.nputrace import NpuTrace
from .metrics import Metrics
from .registry import ProcessRecord, Registry
from .sinks import Sinks
from .traces import TraceStore


@dataclass
class Node:
    registry: Registry
    traces: TraceStore
    delivery: Delivery
    pipeline: CommandPipeline
    nputrace: NpuTrace
    gputrace: GpuTrace
    npumonitor: NpuMonitor
    plugin: PluginClient
    kineto: KinetoClient
    msmonitor: MsMonitorClient
    metrics: Metrics
    drops: Drops
    holds: Holds
    dynamic_attach: DynamicAttach
    dynamic_window: DynamicWindow
    # Told when a process leaves (the `dyno dynamic` sessions that hold it).
    gone_listeners: List[Callable[[ProcessRecord, str], None]] = field(default_factory=list)

    @classmethod
    def build(cls, keepalive_s: float, sinks: Optional[Sinks] = None) -> Node:
        registry, traces, delivery, holds = Registry(keepalive_s), TraceStore(), Delivery(), Holds()
        drops = Drops()
        return cls(
            registry=registry,
            traces=traces,
            delivery=delivery,
            pipeline=CommandPipeline(registry, traces),
            nputrace=NpuTrace(traces, delivery),
            gputrace=GpuTrace(traces, delivery),
            npumonitor=NpuMonitor(delivery),
            plugin=PluginClient(traces, delivery),
            kineto=KinetoClient(traces),
            msmonitor=MsMonitorClient(traces),
            metrics=Metrics(registry, drops, sinks),
            drops=drops,
            holds=holds,
            dynamic_attach=DynamicAttach(holds),
            dynamic_window=DynamicWindow(traces, delivery, holds),
        )

    def process_gone(self, record: ProcessRecord, why: str) -> None:
        """The process left: its trace fails, its reports and its socket are forgotten."""
        self.traces.fail(
            record.host_pid, f"the process {why} at step {record.current_step} before the trace finished"
        )
        self.metrics.forget(record)
        self.delivery.forget(record.host_pid)
        for listener in list(self.gone_listeners):
            listener(record, why)
        self.holds.forget(record.host_pid)

    def close(self) -> None:
        self.metrics.close()
