"""The daemon's trace lifecycle as plugin messages drive it, without processes: phases only move on."""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import NamedTuple

from dynolog.core import traces as traces_module
from dynolog.core.delivery import Delivery
from dynolog.core.registry import ProcessRecord, Registry
from dynolog.core.traces import Trace, TraceStore
from dynolog.ipc.clients.plugin import PluginClient
from dynolog.ipc.endpoint import Sender
from msmonitor_contract import wire
from msmonitor_contract.vocabulary import CommandKind, TracePhase, TraceState

PID = 3_100_000  # no such process: /proc has nothing to contradict the plugin's claims
SENDER = Sender(b"\0t\0", PID, 0)


class Staged(NamedTuple):
    plugin: PluginClient
    traces: TraceStore
    record: ProcessRecord
    trace: Trace


def staged() -> Staged:
    """A plugin process registered, and a trace staged for it."""
    registry, traces = Registry(60.0), TraceStore()
    plugin = PluginClient(registry, traces, Delivery())
    record = plugin.register(SENDER, wire.Hello(pid=PID, capabilities=["push", "nputrace"]))
    trace = traces.new(CommandKind.NPUTRACE)
    traces.stage(trace, record, "/traces/")
    return Staged(plugin, traces, record, trace)


def test_a_heartbeat_built_before_the_last_event_does_not_bring_the_trace_back():
    plugin, traces, record, trace = staged()
    plugin.event(record, wire.TraceEvent(trace_id=trace.trace_id, phase=TracePhase.RUNNING))
    plugin.event(record, wire.TraceEvent(trace_id=trace.trace_id, phase=TracePhase.FINISHED))
    # The link thread read "running" for its heartbeat just before the writer reported "finished".
    stale = wire.Hello(
        pid=PID, capabilities=["push", "nputrace"], trace_id=trace.trace_id, trace_phase="running"
    )
    plugin.register(SENDER, stale)
    plugin.hello(record, stale)
    assert trace.done and traces.active(PID) is None
    assert traces.slot_of(record).state is TraceState.IDLE, "the process is free for the next trace"
    assert [phase for phase, _ in trace.processes[PID].history][-1] is TracePhase.FINISHED


def test_a_report_that_arrives_after_a_later_one_changes_nothing():
    plugin, traces, record, trace = staged()

    def report(phase: TracePhase, files=()):
        plugin.event(record, wire.TraceEvent(trace_id=trace.trace_id, phase=phase, files=list(files)))

    # "ready" and "running" waited in the plugin while the daemon's queue was full; "finished" overtook.
    report(TracePhase.RUNNING)
    report(TracePhase.FINISHED, ["kineto.json"])
    report(TracePhase.READY)
    report(TracePhase.RUNNING)
    process = trace.processes[PID]
    assert trace.done and process.phase is TracePhase.FINISHED and process.files == ["kineto.json"]
    assert [phase for phase, _ in process.history][1:] == [TracePhase.RUNNING, TracePhase.FINISHED]
    assert traces.active(PID) is None, "the process is free for the next trace"


def test_a_ready_report_after_running_leaves_the_trace_running():
    plugin, traces, record, trace = staged()
    plugin.event(record, wire.TraceEvent(trace_id=trace.trace_id, phase=TracePhase.RUNNING, current_step=5))
    plugin.event(record, wire.TraceEvent(trace_id=trace.trace_id, phase=TracePhase.READY, current_step=4))
    assert (trace.processes[PID].phase, trace.processes[PID].current_step) == (TracePhase.RUNNING, 5)
    assert traces.slot_of(record).state is TraceState.RUNNING


def test_the_kept_traces_are_bounded_by_their_processes_oldest_finished_first(monkeypatch):
    monkeypatch.setattr(traces_module, "MAX_PROCESS_ENTRIES", 10)
    registry, traces = Registry(60.0), TraceStore()
    plugin = PluginClient(registry, traces, Delivery())

    def trace_of_four(first_pid: int, finish: bool):
        trace = traces.new(CommandKind.NPUTRACE)
        for pid in range(first_pid, first_pid + 4):
            record = plugin.register(Sender(b"\0t\0", pid, 0), wire.Hello(pid=pid))
            process = traces.stage(trace, record, "/traces/")
            if finish:
                traces.set_phase(trace, process, TracePhase.FINISHED)
        return trace

    running = trace_of_four(PID + 100, finish=False)  # the oldest, but still running
    done = [trace_of_four(PID, finish=True) for _ in range(3)]  # 16 processes in all: over the bound
    kept = [t for t in (running, *done) if traces.get(t.trace_id) is not None]
    assert kept == [running, done[2]], "the oldest finished ones went first"
    assert traces.active(PID + 100) is running

    huge = trace_of_four(PID + 200, finish=False)
    for pid in range(PID + 204, PID + 212):  # one trace over the bound alone: kept whole, the others go
        traces.stage(huge, plugin.register(Sender(b"\0t\0", pid, 0), wire.Hello(pid=pid)), "/traces/")
    assert traces.get(huge.trace_id) is huge and len(huge.processes) == 12
    assert all(traces.get(t.trace_id) is None for t in (running, *done))
    assert traces.active(PID + 100) is None and traces.active(PID + 211) is huge


def test_a_trace_reported_after_the_hello_is_awaited_and_an_unreported_one_is_given_up():
    async def scenario():
        registry, traces = Registry(60.0), TraceStore()
        plugin = PluginClient(registry, traces, Delivery())
        # This test's own process: it was running before the "daemon" (built just now), as a job is
        # that a restarted daemon hears from.
        record = plugin.register(Sender(b"\0t\0", os.getpid(), 0), wire.Hello(pid=os.getpid()))
        waiting = asyncio.ensure_future(traces.learnt("42", timeout=60.0))
        await asyncio.sleep(0)  # let it wait: the event comes after, as a restarted daemon sees it
        plugin.event(record, wire.TraceEvent(trace_id="42", phase=TracePhase.FINISHED))
        learnt = await asyncio.wait_for(waiting, 5.0)
        never = await traces.learnt("43", timeout=0.05)
        return learnt, never

    learnt, never = asyncio.run(scenario())
    assert learnt is not None and learnt.processes[os.getpid()].phase is TracePhase.FINISHED
    assert never is None


def test_only_a_process_older_than_the_daemon_adopts_and_only_one_trace_a_minute_never_another_s():
    registry, traces = Registry(60.0), TraceStore()
    plugin = PluginClient(registry, traces, Delivery())

    def process(pid: int) -> ProcessRecord:
        return plugin.register(
            Sender(b"\0t\0", pid, 0), wire.Hello(pid=pid, capabilities=["push", "nputrace"])
        )

    def report(record: ProcessRecord, trace_id: str) -> None:
        plugin.event(record, wire.TraceEvent(trace_id=trace_id, phase=TracePhase.RUNNING))

    issued = traces.new(CommandKind.NPUTRACE)
    traces.stage(issued, process(PID), "/traces/")
    older = process(os.getpid())
    report(older, issued.trace_id)
    assert list(issued.processes) == [PID], "this daemon knows whom it sent its trace to"
    report(older, "1")
    report(older, "2")
    assert traces.get("1") is not None and traces.get("2") is None, "one adoption a minute"
    with subprocess.Popen(["cat"], stdin=subprocess.PIPE) as younger:  # started after the daemon
        try:
            report(process(younger.pid), "3")
        finally:
            younger.communicate(timeout=30)  # cat ends at the end of its input
    report(process(PID + 1), "4")  # no such process: nothing vouches for it
    assert traces.get("3") is None and traces.get("4") is None


def test_adopted_traces_are_forgotten_before_issued_ones(monkeypatch):
    monkeypatch.setattr(traces_module, "MAX_TRACES", 3)
    registry, traces = Registry(60.0), TraceStore()
    plugin = PluginClient(registry, traces, Delivery())
    issued = traces.new(CommandKind.NPUTRACE)
    traces.stage(issued, plugin.register(SENDER, wire.Hello(pid=PID)), "/traces/")
    for n in range(5):
        record = plugin.register(Sender(b"\0t\0", PID + 1 + n, 0), wire.Hello(pid=PID + 1 + n))
        traces.adopt(record, str(n), TracePhase.RUNNING)
    assert traces.get(issued.trace_id) is issued, "the oldest, still pending, but this daemon's own"
