"""The daemon's one command pipeline, rule by rule, for every kind: targeting, exclusion, capability,
the kind's own rule, the process limit, and the answer's status and reason."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Sequence

from dynolog.core.delivery import Delivery
from dynolog.core.model import CommandResult
from dynolog.core.pipeline import CommandPipeline
from dynolog.core.registry import ClientKind, ProcessRecord, Registry
from dynolog.core.traces import TraceStore
from dynolog.ipc.clients import polling
from dynolog.ipc.clients.plugin import PluginClient
from dynolog.ipc.endpoint import Sender
from dynolog.kinds.dynamic import DynamicAttach, DynamicWindow, Hold, Holds, SessionRequest
from dynolog.kinds.gputrace import GpuTrace
from dynolog.kinds.npumonitor import NpuMonitor
from dynolog.kinds.nputrace import NpuTrace
from msmonitor_contract import wire
from msmonitor_contract.kinds.dynamic import DYNAMIC
from msmonitor_contract.kinds.gputrace import GPUTRACE
from msmonitor_contract.kinds.npumonitor import NPUMONITOR
from msmonitor_contract.kinds.nputrace import NPUTRACE
from msmonitor_contract.targets import Targets
from msmonitor_contract.vocabulary import (
    MONITOR_HOLDER,
    CommandKind,
    MonitorState,
    Reason,
    TracePhase,
    TraceState,
)

# Far above any pid the kernel hands out here: /proc has no such process, so the claim stands.
_PIDS = itertools.count(3_000_000)
PLUGIN_KINDS = ["push", CommandKind.NPUTRACE.value, CommandKind.GPUTRACE.value, CommandKind.NPUMONITOR.value]


class Node:
    def __init__(self) -> None:
        self.registry = Registry(60.0)
        self.traces = TraceStore()
        delivery = Delivery()
        self._plugin = PluginClient(self.registry, self.traces, delivery)
        self.pipeline = CommandPipeline(self.registry, self.traces)
        self.nputrace = NpuTrace(self.traces, delivery)
        self.gputrace = GpuTrace(self.traces, delivery)
        self.npumonitor = NpuMonitor(delivery)

    def plugin(self, rank: int, capabilities: Sequence[str] = PLUGIN_KINDS, step: int = 0) -> ProcessRecord:
        pid = next(_PIDS)
        hello = wire.Hello(pid=pid, rank=rank, job_id=7, capabilities=list(capabilities), step=step)
        return self._plugin.register(Sender(b"\0test\0", pid, 0), hello)

    def kineto(self) -> ProcessRecord:
        pid = next(_PIDS)
        request = wire.KinetoRequest(3, 7, (pid,))
        return polling.register(self.registry, Sender(b"\0test\0", pid, 0), request, ClientKind.KINETO)


def nputrace(start_step: int = -1, **targets: object) -> Any:
    return NPUTRACE.model(log_file="/t", iterations=1, start_step=start_step, targets=Targets(**targets))


def reasons(result: CommandResult) -> list:
    return [o.reason for o in result.outcomes]


def test_nothing_registered_and_nothing_matched_are_refused_before_any_process():
    node = Node()
    empty = node.pipeline.decide(node.nputrace, nputrace())
    assert (empty.effective, empty.reason) == (False, Reason.NO_PROCESS_REGISTERED)
    assert "MSMONITOR_USE_DAEMON=1" in empty.message
    node.plugin(rank=0)
    none = node.pipeline.decide(node.nputrace, nputrace(job_id=99, ranks=(3,)))
    assert (none.reason, none.outcomes) == (Reason.NO_PROCESS_MATCHED, [])
    assert "none of the 1 registered processes matches job 99 and ranks 3" in none.message


def test_the_limit_keeps_the_lowest_ranks_that_can_take_it():
    node = Node()
    spare, free, busy = node.plugin(rank=2), node.plugin(rank=1), node.plugin(rank=0)
    busy.framework_trace = TraceState.RUNNING
    result = node.pipeline.decide(node.nputrace, nputrace(process_limit=1))
    assert [o.record for o in result.outcomes] == [busy, free, spare]  # rank order, not arrival order
    assert reasons(result) == [Reason.TRACE_BUSY, None, Reason.PROCESS_LIMIT]


def test_capability_by_client_stock_kineto_takes_gputrace_only():
    node = Node()
    node.kineto()
    refused = node.pipeline.decide(node.nputrace, nputrace())
    assert reasons(refused) == [Reason.NOT_SUPPORTED] and refused.reason is Reason.NOT_SUPPORTED
    taken = node.pipeline.decide(node.gputrace, GPUTRACE.model(log_file="/t.json", iterations=1))
    assert taken.effective
    monitor = node.pipeline.decide(node.npumonitor, NPUMONITOR.model(start=True))
    assert reasons(monitor) == [Reason.NOT_SUPPORTED]


def test_nputrace_and_npu_monitor_exclude_each_other_per_process():
    node = Node()
    monitoring, tracing, waiting = node.plugin(rank=0), node.plugin(rank=1), node.plugin(rank=2)
    monitoring.monitor_state = MonitorState.RUNNING
    tracing.framework_trace = TraceState.RUNNING
    waiting.outbox = "NPU_MONITOR_START=true"  # an earlier command its client has not polled for yet
    trace = node.pipeline.decide(node.nputrace, nputrace())
    assert reasons(trace) == [Reason.NPU_MONITOR_RUNNING, Reason.TRACE_BUSY, Reason.TRACE_BUSY]
    monitor = node.pipeline.decide(node.npumonitor, NPUMONITOR.model(start=True))
    assert reasons(monitor) == [None, Reason.NPU_TRACE_RUNNING, Reason.TRACE_BUSY]


def test_a_trace_waiting_for_its_step_blocks_a_plugin_monitor_but_not_a_framework_one():
    node = Node()
    plugin, framework = node.plugin(rank=0), node.plugin(rank=1, capabilities=["msmonitor", "npumonitor"])
    plugin.framework_trace = framework.framework_trace = TraceState.READY
    monitor = node.pipeline.decide(node.npumonitor, NPUMONITOR.model(start=True))
    assert reasons(monitor) == [Reason.NPU_TRACE_RUNNING, None]


def test_the_kinds_own_rule_comes_after_exclusion_and_the_commonest_reason_is_the_answer():
    node = Node()
    for rank in range(3):
        node.plugin(rank=rank, step=50)
    node.plugin(rank=3).monitor_state = MonitorState.RUNNING
    result = node.pipeline.decide(node.nputrace, nputrace(start_step=20))
    result.conclude()
    assert reasons(result) == [Reason.START_STEP_PASSED] * 3 + [Reason.NPU_MONITOR_RUNNING]
    assert not result.effective and result.reason is Reason.START_STEP_PASSED
    assert result.message == (
        "no matched process can take nputrace: start step 20 has passed: the process is at step 50"
    )


def test_a_delivered_trace_is_staged_in_every_process_that_took_it_and_then_excludes_a_second():
    node = Node()
    first, second = node.plugin(rank=0), node.plugin(rank=1)
    result = asyncio.run(node.pipeline.run(node.nputrace, nputrace()))
    assert (
        result.effective and result.message == f"nputrace {result.trace_id} sent to 2 of 2 matched processes"
    )
    trace = node.traces.get(result.trace_id)
    assert trace is not None
    assert {p.host_pid: p.phase for p in trace.processes.values()} == {
        first.host_pid: TracePhase.STAGED,
        second.host_pid: TracePhase.STAGED,
    }
    again = node.pipeline.decide(node.nputrace, nputrace())
    assert reasons(again) == [Reason.TRACE_BUSY, Reason.TRACE_BUSY]


def test_attaching_ignores_what_runs_there_but_not_another_controller():
    node = Node()
    holds = Holds()
    attach = DynamicAttach(holds)
    window = DynamicWindow(node.traces, Delivery(), holds)
    kinds = [*PLUGIN_KINDS, CommandKind.DYNAMIC.value]
    monitored, _free, held = (node.plugin(rank, kinds) for rank in (0, 1, 2))
    monitored.monitor_state = MonitorState.RUNNING
    holds.take(held.host_pid, Hold(1, "'alice' (certificate)", "dyno pid 7 on node03", since=0.0))
    mine = SessionRequest(DYNAMIC.model(output="/p"), Hold(2, "bob", "dyno pid 8 on node04"))

    attached = node.pipeline.decide(attach, mine)
    assert reasons(attached) == [None, None, Reason.HELD]
    assert attached.outcomes[2].detail.startswith(
        "held by 'alice' (certificate), dyno pid 7 on node03, since "
    )
    # A window runs a profiler: what excludes a trace excludes it.
    started = node.pipeline.decide(window, mine)
    assert reasons(started) == [Reason.NPU_MONITOR_RUNNING, None, Reason.HELD]
    # The holder itself is not refused by its own hold.
    own = SessionRequest(mine.attach, Hold(1, "'alice' (certificate)", "dyno pid 7 on node03"))
    assert reasons(node.pipeline.decide(attach, own)) == [None, None, None]


def test_the_plugins_word_on_its_profiler_comes_first_naming_the_holder():
    """The service profiler's operator collection tells the daemon nothing but the hello's holder."""
    node = Node()
    serving = node.plugin(rank=0)
    serving.profiler = "the service profiler's operator collection (acl_task_time 2)"
    monitoring = node.plugin(rank=1)
    monitoring.profiler = MONITOR_HOLDER
    trace = node.pipeline.decide(node.nputrace, nputrace())
    assert reasons(trace) == [Reason.TRACE_BUSY, Reason.NPU_MONITOR_RUNNING]
    assert trace.outcomes[0].detail == (
        f"{Reason.TRACE_BUSY.value} (the service profiler's operator collection (acl_task_time 2) holds "
        "its one profiler)"
    )
    monitor = node.pipeline.decide(node.npumonitor, NPUMONITOR.model(start=True))
    assert reasons(monitor) == [Reason.NPU_TRACE_RUNNING, None], "a change to the monitor holding it passes"
