"""The daemon's dispatcher, in process: any datagram from any sender ends in exactly one counter
(handled, malformed, rejected) without raising, and whatever it stored can still be served over gRPC.

The live daemon is fuzzed in test_fuzz_daemon.py; here each example is cheap, so far more of them run.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Dict, List, Tuple

from fuzz_strategies import JSON_TYPES, data_messages, datagrams, metric_chunks, scaled, well_framed
from hypothesis import example, given
from hypothesis import strategies as st

from dynolog.core.model import MsMonitorStatus
from dynolog.core.registry import ClientKind, Registry
from dynolog.edge.rpc import convert
from dynolog.ipc.dispatch import IpcDispatcher
from dynolog.ipc.endpoint import DYNOLOG, MSMONITOR, MSMONITOR_DATA, IpcCounters, IpcEndpoint, Sender
from dynolog.monitoring.metrics import Watched
from dynolog.node import Node
from msmonitor_contract import wire
from msmonitor_contract.report import ChunkAssembler, ReportError
from msmonitor_contract.targets import Targets

UID = os.getuid()
# Senders the kernel could report: this process and its parent (both alive, so the registry keeps
# them), and a uid the daemon does not serve.
SENDERS = [
    Sender(b"\0fuzz-self\0", os.getpid(), UID),
    Sender(b"\0fuzz-parent\0", os.getppid(), UID),
    Sender(b"\0fuzz-stranger\0", os.getpid(), UID + 12345),
]


class RecordingEndpoint(IpcEndpoint):
    """An endpoint whose replies are kept, not sent."""

    def __init__(self, flavour: str, counters: IpcCounters) -> None:
        super().__init__(b"\0fuzz-daemon\0", lambda *_: None, counters, flavour)
        self.replies: List[Tuple[bytes, wire.Address]] = []

    def send(self, data: bytes, address: wire.Address) -> bool:
        self.replies.append((data, address))
        return True


def _outcomes(c: IpcCounters) -> int:
    return c.handled + c.malformed + c.rejected_senders


def _trace_ids(data: bytes) -> List[str]:
    """The trace ids a datagram announces, so the test can look them up afterwards."""
    try:
        datagram = wire.decode(data)
        cls = JSON_TYPES.get(datagram.type)
        message = cls.from_payload(datagram.payload) if cls in (wire.Hello, wire.TraceEvent) else None
    except wire.WireError:
        return []
    return [message.trace_id] if message is not None and message.trace_id else []


sequences = st.lists(
    st.tuples(
        st.sampled_from(range(len(SENDERS))),
        st.sampled_from([DYNOLOG, MSMONITOR, MSMONITOR_DATA]),
        datagrams | well_framed(),
    ),
    min_size=1,
    max_size=12,
)


@scaled(100)
@given(sequences)
def test_every_datagram_ends_in_one_counter_and_what_is_kept_can_be_served(
    sequence: List[Tuple[int, str, bytes]],
) -> None:
    node = Node.build(keepalive_s=60.0)
    dispatcher = IpcDispatcher(node, [UID])
    endpoints = {f: RecordingEndpoint(f, dispatcher.counters) for f in (DYNOLOG, MSMONITOR, MSMONITOR_DATA)}
    watch = node.metrics.watch(Targets(), latest=False)
    trace_ids: List[str] = []
    try:
        for n, (who, flavour, data) in enumerate(sequence, 1):
            dispatcher.dispatch(endpoints[flavour], data, SENDERS[who])
            assert _outcomes(dispatcher.counters) == n, data
            trace_ids += _trace_ids(data)
        for endpoint in endpoints.values():
            for reply, _ in endpoint.replies:
                wire.decode(reply)  # every reply is a well-formed datagram
        # What peers made the daemon keep converts to the gRPC messages that serve it.
        records = list(node.registry)
        slots = [node.traces.slot_of(record) for record in records]
        for record, slot in zip(records, slots):
            convert.process_info(record, slot, "")
        convert.msmonitor_status(MsMonitorStatus.of(records, slots))
        for trace_id in trace_ids:
            trace = node.traces.get(trace_id)
            if trace is not None:
                convert.trace_info(trace)
        _serve(node, node.metrics.watch(Targets(), latest=True))
        assert watch.qsize() <= len(sequence)
        _serve(node, watch)
    finally:
        node.metrics.unwatch(watch)
        node.close()


def _serve(node: Node, queue: asyncio.Queue[Watched]) -> None:
    """Every report *queue* holds converts to the gRPC message that serves it; then it is unwatched."""
    while not queue.empty():
        convert.metrics_report(*queue.get_nowait(), node.metrics.hostname)
    node.metrics.unwatch(queue)


def _chunk(**changes: object) -> bytes:
    """One whole report in one chunk, with *changes*."""
    head = {"v": 1, "seq": 1, "pid": 1, "part": 0, "parts": 1, "backend": "x", "kinds": []}
    return json.dumps({**head, "start_ns": 0, "end_ns": 1, "sampled_ns": 1, **changes}).encode()


def _kind(**changes: object) -> Dict[str, object]:
    return {"kind": "Kernel", "device": 0, "count": 1, "total_ns": 1, "min_ns": 1, "max_ns": 1, **changes}


RECORD = Registry(60.0).touch(Sender(b"\0fuzz\0", os.getpid(), UID), os.getpid(), ClientKind.PLUGIN)
nested = st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n)


@scaled(150)
@given(st.lists(metric_chunks | nested | st.binary(max_size=40), min_size=1, max_size=4))
@example([_chunk(kinds=[_kind(count=-1)])])
@example([_chunk(kinds=[_kind(count=float("inf"))])])
@example([_chunk(kinds=[1])])
@example([_chunk(dropped={"x": -1})])
@example([_chunk(parts=2, pid=float("inf"))])
@example([b"[" * 5000])
def test_report_chunks_assemble_into_what_can_be_served_or_raise_report_error(chunks: List[bytes]) -> None:
    """The documented error, ReportError, and nothing else; an assembled report fits its gRPC message."""
    assembler = ChunkAssembler(max_pending=2)
    for chunk in chunks:
        try:
            report = assembler.add(chunk)
        except ReportError:
            continue
        if report is not None:
            convert.metrics_report(RECORD, report, "fuzz")


@scaled(100)
@given(
    st.sampled_from([wire.REQ, wire.HELLO]),
    st.lists(well_framed(st.sampled_from([wire.DATA, wire.METRICS])), max_size=4),
)
def test_reports_from_a_registered_process_are_refused_or_served(register: str, reports: List[bytes]) -> None:
    """msMonitor's ``data`` (from a polling client) and this project's chunks (from a plugin)."""
    node = Node.build(keepalive_s=60.0)
    dispatcher = IpcDispatcher(node, [UID])
    endpoint = RecordingEndpoint(DYNOLOG, dispatcher.counters)
    sender = SENDERS[0]
    first = (
        wire.KinetoRequest(3, 0, (sender.pid,)).pack()
        if register == wire.REQ
        else wire.Hello(pid=sender.pid).to_payload()
    )
    watch = node.metrics.watch(Targets(), latest=False)
    try:
        dispatcher.dispatch(endpoint, wire.encode(register, first), sender)
        assert dispatcher.counters.handled == 1
        for n, data in enumerate(reports, 2):
            dispatcher.dispatch(endpoint, data, sender)
            assert _outcomes(dispatcher.counters) == n
        _serve(node, node.metrics.watch(Targets(), latest=True))
        _serve(node, watch)
    finally:
        node.metrics.unwatch(watch)
        node.close()


@scaled(150)
@given(st.lists(data_messages | nested | st.binary(max_size=40), min_size=1, max_size=3))
@example([b'{"kind": "Kernel", "deviceId": 0, "duration": -1, "timestamp": 0}'])
@example([b'{"kind": "Kernel", "deviceId": 0, "duration": Infinity, "timestamp": 0}'])
@example([b'{"kind": "Marker", "deviceId": 0, "duration": 1, "timestamp": 0, "domain": 1}'])
@example([b'{"kind": "Kernel", "deviceId": -5, "duration": 1, "timestamp": 0}'])
@example([b'{"kind": "Kernel", "deviceId": 0, "duration": 1, "timestamp": 9223372036854775808}'])
def test_msmonitor_data_messages_are_kept_as_what_can_be_served_or_raise_wire_error(
    payloads: List[bytes],
) -> None:
    """msMonitor's ``data``: the documented WireError and nothing else; what is kept fits its gRPC message."""
    node = Node.build(keepalive_s=60.0)
    watch = node.metrics.watch(Targets(), latest=False)
    try:
        for payload in payloads:
            try:
                node.metrics.data_message(RECORD, payload)
            except wire.WireError:
                continue
        _serve(node, node.metrics.watch(Targets(), latest=True))
        _serve(node, watch)
    finally:
        node.metrics.unwatch(watch)
        node.close()
