"""A push into a full socket is lost without a word: delivery keeps every unanswered command per process
and kind, pushes it again at each heartbeat, and forgets it once answered."""

from __future__ import annotations

from typing import List, Tuple

from dynolog.core.delivery import Delivery
from dynolog.core.registry import ClientKind, Registry
from dynolog.ipc.endpoint import Sender
from msmonitor_contract import wire
from msmonitor_contract.vocabulary import CommandKind

PID = 3_200_000  # no such process: /proc has nothing to contradict the claims
ADDRESS = b"\0delivery-test\0"


class LossyEndpoint:
    """Drops the first *lose* datagrams, as a full socket does; records what got through."""

    def __init__(self, lose: int) -> None:
        self.lose = lose
        self.sent: List[Tuple[str, str]] = []

    def send(self, data: bytes, address: wire.Address) -> bool:
        if self.lose:
            self.lose -= 1
            return False
        command = wire.Command.from_payload(wire.decode(data).payload)
        self.sent.append((command.kind, command.trace_id))
        return True


def _plugin_process(delivery: Delivery, endpoint: LossyEndpoint):
    record = Registry(60.0).touch(Sender(ADDRESS, PID, 0), PID, ClientKind.PLUGIN)
    record.capabilities = ("push", CommandKind.DYNAMIC.value, CommandKind.NPUMONITOR.value)
    delivery.plugin_seen(PID, endpoint)  # type: ignore[arg-type]
    return record


def test_a_lost_push_of_any_kind_is_pushed_again_at_each_heartbeat_until_answered():
    delivery, endpoint = Delivery(), LossyEndpoint(lose=2)
    record = _plugin_process(delivery, endpoint)
    assert delivery.stage_or_push(record, CommandKind.NPUMONITOR, "m1", "NPU_MONITOR_START=true")
    delivery.push(record, CommandKind.DYNAMIC, "w1", "DYNAMIC_ACTION=stop", final_only=True)
    assert endpoint.sent == []  # both lost
    delivery.heartbeat(record)
    assert sorted(endpoint.sent) == [("dynamic", "w1"), ("npumonitor", "m1")]
    delivery.answered(PID, CommandKind.NPUMONITOR, "m1")
    delivery.answered(PID, CommandKind.DYNAMIC, "w1", final=False)  # the window's news, not its end
    endpoint.sent.clear()
    delivery.heartbeat(record)
    assert endpoint.sent == [("dynamic", "w1")], "a window's stop is answered only by the window's end"
    delivery.answered(PID, CommandKind.DYNAMIC, "w1", final=True)
    endpoint.sent.clear()
    delivery.heartbeat(record)
    assert endpoint.sent == []


def test_an_answer_to_an_older_command_leaves_the_newer_one_unanswered():
    delivery, endpoint = Delivery(), LossyEndpoint(lose=0)
    record = _plugin_process(delivery, endpoint)
    delivery.push(record, CommandKind.NPUMONITOR, "m1", "NPU_MONITOR_START=true")
    delivery.push(record, CommandKind.NPUMONITOR, "m2", "NPU_MONITOR_STOP=true")
    delivery.answered(PID, CommandKind.NPUMONITOR, "m1")
    endpoint.sent.clear()
    delivery.heartbeat(record)
    assert endpoint.sent == [("npumonitor", "m2")]
    delivery.forget(PID)  # the process left; a new one with its pid starts clean
    delivery.plugin_seen(PID, endpoint)  # type: ignore[arg-type]
    endpoint.sent.clear()
    delivery.heartbeat(record)
    assert endpoint.sent == []
