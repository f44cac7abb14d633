"""The daemon's trace lifecycle as plugin messages drive it, without processes: phases only move on."""

from __future__ import annotations

from dynolog.clients.plugin import PluginClient
from dynolog.delivery import Delivery
from dynolog.registry import Registry
from dynolog.traces import TraceStore
from msmonitor_plugin import wire
from msmonitor_plugin.vocabulary import CommandKind, TracePhase, TraceState

PID = 3_100_000  # no such process: /proc has nothing to contradict the plugin's claims


def test_a_heartbeat_built_before_the_last_event_does_not_bring_the_trace_back():
    registry, traces = Registry(60.0), TraceStore()
    plugin = PluginClient(traces, Delivery())
    record = registry.plugin_hello(PID, 0, wire.Hello(pid=PID, capabilities=["push", "nputrace"]), b"\0t\0")
    trace = traces.new(CommandKind.NPUTRACE)
    traces.stage(trace, record, "/traces/")
    plugin.event(record, wire.TraceEvent(trace_id=trace.trace_id, phase=TracePhase.RUNNING))
    plugin.event(record, wire.TraceEvent(trace_id=trace.trace_id, phase=TracePhase.FINISHED))
    # The link thread read "running" for its heartbeat just before the writer reported "finished".
    stale = wire.Hello(
        pid=PID, capabilities=["push", "nputrace"], trace_id=trace.trace_id, trace_phase="running"
    )
    registry.plugin_hello(PID, 0, stale, b"\0t\0")
    plugin.hello(record, stale)
    assert trace.done and traces.active(PID) is None
    assert record.trace_state is TraceState.IDLE, "the process is free for the next trace"
    assert [phase for phase, _ in trace.processes[PID].history][-1] is TracePhase.FINISHED
