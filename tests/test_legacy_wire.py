"""The legacy JSON RPC as the daemon reads it: each CLI's exact request bytes to the daemon's command
model, what gets no answer, and how the port tells TLS for gRPC from TLS for the JSON RPC."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

import legacy_cli as cli
from dynolog.edge.legacy.request import Call, Failed, SetConfig, parse
from dynolog.edge.legacy.service import _kind
from dynolog.edge.port.sniff import MAX_SNIFFED, Sniffer, Start, start_of
from dynolog.kinds.gputrace import GpuTrace
from dynolog.kinds.npumonitor import NpuMonitor
from dynolog.kinds.nputrace import NpuTrace
from dynolog.node import Node
from dynoproto import legacy
from dynoproto.legacy import LegacyError
from msmonitor_contract.kinds.gputrace import GPUTRACE
from msmonitor_contract.kinds.npumonitor import NPUMONITOR
from msmonitor_contract.kinds.nputrace import NPUTRACE
from msmonitor_contract.targets import Targets
from port_attacks import client_hello, endless_client_hello, in_records_of


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    node = Node.build(keepalive_s=60.0)
    yield node
    node.close()


def command_of(node: Node, body: bytes) -> Any:
    """The model command a setKinetOnDemandRequest body becomes, as the legacy edge reads it."""
    request = parse(body)
    assert isinstance(request, SetConfig), request
    return node.commands[_kind(request.config)].from_text(request.config, request.targets)


def test_status_and_version_are_the_18_and_19_bytes_both_clis_send() -> None:
    assert len(cli.STATUS) == 18 and legacy.call(legacy.GET_STATUS) == cli.STATUS
    assert len(cli.VERSION) == 19 and legacy.call(legacy.GET_VERSION) == cli.VERSION
    assert parse(cli.STATUS) == Call("getStatus")
    assert parse(cli.VERSION) == Call("getVersion")


def test_stock_gputrace_in_duration_and_iteration_mode(node: Node) -> None:
    duration = command_of(node, cli.set_config(cli.stock_gputrace("/tmp/x.json")))
    assert duration == GPUTRACE.model(Targets(process_limit=3), "/tmp/x.json", duration_ms=500)
    iterations = command_of(
        node, cli.set_config(cli.stock_gputrace("/tmp/x.json", iterations=3), 7, "12,13", 9)
    )
    assert iterations == GPUTRACE.model(
        Targets(job_id=7, pids=(12, 13), process_limit=9),
        "/tmp/x.json",
        iterations=3,
        profile_start_iteration_roundup=1,
    )
    memory = command_of(node, cli.set_config(cli.stock_gputrace("/tmp/m.json", duration_ms=800, memory=True)))
    assert memory.profile_memory and memory.duration_ms == 800


def test_msmonitor_nputrace_with_its_27_keys(node: Node) -> None:
    lines = cli.msmonitor_nputrace("/data/prof", 100, 2)
    assert len(lines) == 27
    command = command_of(node, cli.set_config(lines))
    assert command == NPUTRACE.model(
        Targets(process_limit=3),
        "/data/prof",
        start_step=100,
        iterations=2,
        activities=("CPU", "NPU"),
        profiler_level="Level0",
        aic_metrics="AiCoreNone",
        data_simplification=True,
        export_type="Text",
    )


def test_msmonitor_nputrace_ranks_thresholds_and_an_older_release(node: Node) -> None:
    lines = cli.msmonitor_nputrace(
        "/d",
        -1,
        1,
        PROFILE_IS_RANK="true",
        PROFILE_RANK_LIST="0,2",
        PROFILE_GC_DETECT_THRESHOLD="12.5",
        PROFILE_HOST_SYS="cpu,mem",
    )
    command = command_of(node, cli.set_config(lines))
    assert (command.targets.ranks, command.gc_detect_threshold, command.host_sys) == (
        (0, 2),
        12.5,
        ("cpu", "mem"),
    )
    assert command.start_step == -1
    older = [
        line for line in cli.msmonitor_nputrace("/d", 5, 1) if not line.startswith(cli.NEWER_NPUTRACE_KEYS)
    ]
    assert command_of(node, cli.set_config(older)).start_step == 5


def test_msmonitor_npu_monitor_in_full_and_as_its_first_release_sent_it(node: Node) -> None:
    full = command_of(
        node, cli.set_config(cli.msmonitor_npu_monitor(True, DURATION="1.5", NPU_MONITOR_EXPORT_TYPE="Jsonl"))
    )
    assert full == NPUMONITOR.model(
        Targets(process_limit=3),
        start=True,
        report_interval_s=60,
        duration_s=1.5,
        activity_kinds=("Marker",),
        export_type="Jsonl",
    )
    old = command_of(node, cli.set_config(cli.msmonitor_npu_monitor(False, True, 30, old=True)))
    assert (old.start, old.stop, old.report_interval_s) == (False, True, 30)


@pytest.mark.parametrize(
    "policy, command",
    [
        (
            NpuTrace,
            NPUTRACE.model(
                Targets(ranks=(1,)),
                "/p",
                start_step=7,
                iterations=2,
                activities=("CPU",),
                gc_detect_threshold=3.0,
            ),
        ),
        (NpuTrace, NPUTRACE.model(Targets(), "/p", duration_ms=300, activities=("CPU",), analyse=True)),
        (GpuTrace, GPUTRACE.model(Targets(), "/g.json", duration_ms=400, profile_memory=True)),
        (GpuTrace, GPUTRACE.model(Targets(), "/g.json", iterations=4, profile_start_iteration_roundup=5)),
        (
            NpuMonitor,
            NPUMONITOR.model(Targets(), start=True, report_interval_s=5, activity_kinds=("Kernel",), top_n=7),
        ),
    ],
)
def test_a_command_read_back_from_its_own_text_is_the_command(node: Node, policy: Any, command: Any) -> None:
    kind = node.commands[policy.rpc]
    text = kind.text(command)
    assert _kind(text) == policy.rpc
    read = kind.from_text(text, command.targets)
    assert kind.text(read) == text
    assert read.targets == command.targets


@pytest.mark.parametrize(
    "body, why",
    [
        (cli.set_config(cli.stock_gputrace('/tmp/a"b.json')), "not JSON"),  # the CLIs do not escape
        (cli.set_config(cli.stock_gputrace("/tmp/a\\q.json")), "not JSON"),
        (cli.set_config(cli.stock_gputrace("/tmp/x.json"), pids="1,abc"), "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deep"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"config": "x"}', "no fn"),
        (b'{"fn": "dcgmProfPause", "duration_s": 60}', "unknown fn"),
    ],
)
def test_what_the_cpp_daemons_close_on_gets_no_answer(body: bytes, why: str) -> None:
    with pytest.raises(LegacyError, match=why):
        parse(body)


@pytest.mark.parametrize(
    "body, why",
    [
        (b'{"fn": "setKinetOnDemandRequest", "pids": [0]}', "config is missing"),
        (b'{"fn": "setKinetOnDemandRequest", "config": ""}', "pids is missing"),
        (b'{"fn": "setKinetOnDemandRequest", "config": "", "pids": "1"}', "pids must be a list"),
        (
            b'{"fn": "setKinetOnDemandRequest", "config": "", "pids": [], "job_id": "7"}',
            "job_id must be an integer",
        ),
        (b'{"fn": "setKinetOnDemandRequest", "config": 5, "pids": []}', "config must be a string"),
    ],
)
def test_a_request_with_unusable_fields_is_answered_failed(body: bytes, why: str) -> None:
    request = parse(body)
    assert isinstance(request, Failed) and why in request.why


def test_the_first_bytes_tell_grpc_tls_and_a_legacy_length_apart() -> None:
    assert start_of(b"PRI * HTTP/2.0"[:4]) is Start.HTTP2
    assert start_of(client_hello(None)[:4]) is Start.TLS
    assert start_of(cli.frame(cli.STATUS)[:4]) is Start.LEGACY
    assert start_of(cli.frame(b"x" * legacy.MAX_REQUEST)[:4]) is Start.LEGACY


def alpn_of(data: bytes) -> Any:
    sniffed = Sniffer().feed(data)
    return sniffed if sniffed is None else sniffed.alpn


def test_alpn_is_read_from_a_client_hello_whole_split_or_absent() -> None:
    grpc_hello = client_hello(["h2"])
    assert alpn_of(grpc_hello) == ("h2",)
    assert alpn_of(client_hello(None)) == ()
    assert alpn_of(grpc_hello[:50]) is None  # not all there yet
    # The same handshake message split over two records, as a TLS stack may send it.
    assert alpn_of(in_records_of(grpc_hello, len(grpc_hello) // 2)) == ("h2",)
    with pytest.raises(ValueError):
        alpn_of(b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00")  # a ServerHello is not a ClientHello


def test_a_client_hello_in_one_byte_records_fed_a_byte_at_a_time_is_read() -> None:
    data = in_records_of(client_hello(["h2", "http/1.1"]), 1)
    sniffer = Sniffer()
    found = [sniffer.feed(data[i : i + 1]) for i in range(len(data))]
    assert found[-1] is not None and found[-1].alpn == ("h2", "http/1.1")
    assert not any(found[:-1])
    assert bytes(sniffer.data) == data  # all of it, for the server that takes the connection over


def test_sniffing_stops_at_its_byte_cap() -> None:
    endless = endless_client_hello(MAX_SNIFFED + 6)
    sniffer = Sniffer()
    with pytest.raises(ValueError, match="no ClientHello in the first"):
        for i in range(0, len(endless), 1000):
            sniffer.feed(endless[i : i + 1000])
    assert MAX_SNIFFED <= len(sniffer.data) < MAX_SNIFFED + 1000
