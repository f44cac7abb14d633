"""Hostile values a real daemon refuses on both of its wires (gRPC, the legacy JSON RPC) before any
process hears of them: paths a consumer would read otherwise than they were checked, targets, steps
and durations without bound, numbers int() would take loosely, and infinities."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any, Callable, Dict, Iterator

import grpc
import pytest

import legacy_cli as cli
from dynolog.core.delivery import Delivery
from dynolog.core.traces import TraceStore
from dynolog.kinds.nputrace import NpuTrace
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, wait_until
from msmonitor_contract import configtext, rules, targets, wire
from msmonitor_contract.kinds import NPUTRACE, dynamic, tracing
from msmonitor_contract.targets import Targets


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "troot"
    folder.mkdir()
    return folder


@pytest.fixture
def guarded(start_daemon: Callable[..., Daemon], root: Path) -> Daemon:
    return start_daemon("--trace-root", str(root))


@contextlib.contextmanager
def stub(daemon: Daemon) -> Iterator[pb_grpc.DynologStub]:
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        yield pb_grpc.DynologStub(channel)


def refusal(call: Callable[[], Any]) -> str:
    """The details of the INVALID_ARGUMENT *call* must end in."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return str(caught.value.details())


def legacy(daemon: Daemon, lines: list, **kwargs: Any) -> Dict[str, Any]:
    reply = cli.send(daemon.port, cli.set_config(lines, **kwargs))
    assert reply is not None
    return json.loads(reply)  # type: ignore[no-any-return]


def attach(**fields: Any) -> Iterator[pb.DynamicRequest]:
    defaults: Dict[str, Any] = dict(
        targets=pb.Targets(pids=[1]), output="/tmp/windows", options=pb.DynamicOptions(activities=["CPU"])
    )
    yield pb.DynamicRequest(
        seq=1, action=pb.DYNAMIC_ACTION_ATTACH, attach=pb.DynamicAttach(**{**defaults, **fields})
    )


def first_reply(daemon: Daemon, requests: Iterator[pb.DynamicRequest]) -> None:
    with stub(daemon) as s:
        next(iter(s.Dynamic(requests, timeout=10)))


# --- 1: a path checked as each consumer reads it ---------------------------------------------------


def bypass(root: Path) -> str:
    """Inside the root as written; Kineto cuts it at '#' and writes beside the root."""
    return f"{root}/../outside.json#/../{root.name}/ok.json"


def test_a_hash_in_a_kineto_path_is_refused_on_grpc(guarded: Daemon, root: Path) -> None:
    with stub(guarded) as s:
        why = refusal(
            lambda: s.GpuTrace(pb.GpuTraceRequest(log_file=bypass(root), duration_ms=500), timeout=10)
        )
    assert "--log-file: may not contain '#' (Kineto reads the rest as a comment)" in why


def test_a_hash_in_a_kineto_path_is_refused_on_the_legacy_wire(guarded: Daemon, root: Path) -> None:
    reply = legacy(guarded, cli.stock_gputrace(bypass(root)))
    assert reply["commandStatus"] == "ineffective"
    assert "may not contain '#'" in reply["message"]


def test_a_json_folder_kineto_would_rename_is_refused(guarded: Daemon, root: Path) -> None:
    """Kineto puts ``_<pid>`` after the first ``.json``: in a folder, another folder than was checked."""
    log_file = f"{root}/a.json/../b.json"
    with stub(guarded) as s:
        why = refusal(lambda: s.GpuTrace(pb.GpuTraceRequest(log_file=log_file, duration_ms=500), timeout=10))
    assert "may have '.json' in its file name only" in why
    assert "'.json' in its file name only" in legacy(guarded, cli.stock_gputrace(log_file))["message"]


def test_dyno_refuses_them_before_sending(daemon: Daemon, root: Path) -> None:
    """The same rule runs in dyno: exit 2, naming the flag, nothing sent."""
    hashed = daemon.dyno("gputrace", "--log-file", bypass(root), "--duration-ms", "500")
    assert hashed.returncode == 2 and "--log-file: may not contain '#'" in hashed.stderr, hashed.stderr
    far = daemon.dyno("nputrace", "--log-file", str(root), "--start-step", str(HUGE), "--iterations", "1")
    assert far.returncode == 2 and "--start-step: must be -1 (the next step) or a step number" in far.stderr


def test_every_kind_refuses_a_hash_in_its_output(guarded: Daemon, root: Path) -> None:
    path = f"{root}/a#b"
    with stub(guarded) as s:
        for call in (
            lambda: s.NpuTrace(
                pb.NpuTraceRequest(log_file=path, iterations=1, activities=["CPU"]), timeout=10
            ),
            lambda: s.NpuMonitor(pb.NpuMonitorRequest(start=True, log_file=path), timeout=10),
        ):
            assert "may not contain '#'" in refusal(call)
    assert "may not contain '#'" in refusal(lambda: first_reply(guarded, attach(output=path)))
    assert "may not contain '#'" in legacy(guarded, cli.msmonitor_nputrace(path, 5, 1))["message"]


# --- 2: targets bounded, errors short, WatchMetrics checked too ------------------------------------


def test_a_long_pid_list_is_refused_in_a_short_message(daemon: Daemon) -> None:
    pids = list(range(1, 1_000_001))
    with stub(daemon) as s:
        request = pb.NpuTraceRequest(
            log_file="/tmp/t", iterations=1, activities=["CPU"], targets=pb.Targets(pids=pids)
        )
        why = refusal(lambda: s.NpuTrace(request, timeout=30))
        assert why == f"--pids: lists 1000000 numbers, more than {targets.MAX_PIDS}"
        ranks = refusal(lambda: next(s.WatchMetrics(pb.WatchMetricsRequest(targets=pb.Targets(ranks=pids)))))
        assert ranks == f"--rank-list: lists 1000000 numbers, more than {targets.MAX_RANKS}"


def test_a_bad_pid_is_named_alone(daemon: Daemon) -> None:
    pids = [*range(1, 4000), -7]
    with stub(daemon) as s:
        request = pb.WatchMetricsRequest(targets=pb.Targets(pids=pids))
        why = refusal(lambda: next(s.WatchMetrics(request, timeout=10)))
    assert why == "--pids: pids must be positive, got -7 (number 4000 of 4000)"


def test_no_match_names_a_few_targets_and_counts_the_rest(daemon: Daemon, start_workload: Any) -> None:
    job = start_workload("idle.py", daemon.plugin_env(), "--init")
    wait_until(lambda: daemon.process(job.pid), what="registration")
    pids = list(range(3_000_000, 3_000_000 + targets.MAX_PIDS))
    with stub(daemon) as s:
        answer = s.NpuTrace(
            pb.NpuTraceRequest(
                log_file="/tmp/t", iterations=1, activities=["CPU"], targets=pb.Targets(pids=pids)
            ),
            timeout=30,
        )
    assert answer.reason == pb.REASON_NO_PROCESS_MATCHED
    assert f"pids {','.join(map(str, pids[:8]))} and {targets.MAX_PIDS - 8} more;" in answer.message


HUGE_TEXT = "x" * 1_000_000


@pytest.mark.parametrize(
    ("rpc", "request_", "says"),
    [
        (
            "NpuTrace",
            pb.NpuTraceRequest(log_file=HUGE_TEXT, iterations=1, activities=["CPU"]),
            "--log-file: must be an absolute path",
        ),
        (
            "GpuTrace",
            pb.GpuTraceRequest(log_file="/" + HUGE_TEXT, duration_ms=1),
            "--log-file: is longer than 4096 characters",
        ),
        (
            "NpuTrace",
            pb.NpuTraceRequest(log_file="/t", iterations=1, activities=["GPU"] * 100_000),
            "--activities: accepts CPU, NPU; got GPU, GPU",
        ),
        (
            "NpuMonitor",
            pb.NpuMonitorRequest(start=True, export_type=HUGE_TEXT),
            "--export-type: must be DB or Jsonl, got 'xxx",
        ),
        (
            "NpuMonitor",
            pb.NpuMonitorRequest(start=True, filter="a=" * 500_000),
            "--filter: is longer than 1024 characters",
        ),
        (
            "NpuMonitor",
            pb.NpuMonitorRequest(start=True, jsonl_rotate_log_lines=HUGE_TEXT),
            "(1000000 characters)",
        ),
    ],
)
def test_a_huge_value_is_not_echoed(guarded: Daemon, rpc: str, request_: Any, says: str) -> None:
    """The refusal names the value shortly: echoed whole it would exceed gRPC's metadata limit."""
    with stub(guarded) as s:
        why = refusal(lambda: getattr(s, rpc)(request_, timeout=30))
    assert says in why and len(why) < 1000, why[:2000]


def test_the_most_ranks_and_the_longest_names_fit_one_command_datagram() -> None:
    """nputrace's config text carries its ranks: at the limits it is still one datagram a plugin reads."""
    names = tuple("d" * 100 for _ in range(9))  # 908 characters of the 1024 a list may have
    command = NPUTRACE.model(
        targets=Targets(ranks=tuple(range(2**31 - targets.MAX_RANKS, 2**31))),
        log_file="/" + "x" * (rules.MAX_PATH - 1),
        iterations=1,
        activities=("CPU", "NPU"),
        mstx_domain_include=names,
        mstx_domain_exclude=names,
    )
    assert NPUTRACE.check(command) == []
    text = configtext.with_trace_id(NpuTrace(TraceStore(), Delivery()).text(command), "1" * 18)
    payload = wire.Command(kind="nputrace", trace_id="1" * 18, config=text).to_payload()
    assert len(wire.encode(wire.COMMAND, payload)) <= wire.MAX_DATAGRAM


# --- 7: steps, iterations and durations bounded ----------------------------------------------------

HUGE = 9_223_372_036_854_775_000


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            dict(start_step=HUGE, iterations=1),
            f"--start-step: must be -1 (the next step) or a step number in 0..{tracing.MAX_STEP}",
        ),
        (dict(iterations=1_000_000_000), f"--iterations: must be in 1..{tracing.MAX_ITERATIONS}"),
        (dict(duration_ms=2**62), f"--duration-ms: must be in 1..{tracing.MAX_DURATION_MS} ms"),
        (dict(iterations=1, gc_detect_threshold=math.inf), "--gc-detect-threshold: must be finite"),
    ],
)
def test_nputrace_bounds(daemon: Daemon, fields: Dict[str, Any], message: str) -> None:
    with stub(daemon) as s:
        request = pb.NpuTraceRequest(log_file="/tmp/t", activities=["CPU"], **fields)
        assert message in refusal(lambda: s.NpuTrace(request, timeout=10))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(iterations=1_000_000_000), f"--iterations: must be in 1..{tracing.MAX_ITERATIONS}"),
        (dict(duration_ms=2**62), f"--duration-ms: must be in 1..{tracing.MAX_DURATION_MS} ms"),
        (dict(iterations=1, profile_start_iteration_roundup=2**40), "--profile-start-iteration-roundup"),
    ],
)
def test_gputrace_bounds(daemon: Daemon, fields: Dict[str, Any], message: str) -> None:
    with stub(daemon) as s:
        request = pb.GpuTraceRequest(log_file="/tmp/t.json", **fields)
        assert message in refusal(lambda: s.GpuTrace(request, timeout=10))


def test_bounds_hold_on_the_legacy_wire(daemon: Daemon) -> None:
    reply = legacy(daemon, cli.msmonitor_nputrace("/tmp/t", HUGE, 1))
    assert "--start-step: must be -1 (the next step) or a step number in 0.." in reply["message"]
    reply = legacy(daemon, cli.msmonitor_nputrace("/tmp/t", 5, 1_000_000_000))
    assert f"--iterations: must be in 1..{tracing.MAX_ITERATIONS}" in reply["message"]
    reply = legacy(daemon, cli.stock_gputrace("/tmp/t.json", duration_ms=2**62))
    assert f"--duration-ms: must be in 1..{tracing.MAX_DURATION_MS} ms" in reply["message"]
    reply = legacy(daemon, cli.msmonitor_nputrace("/tmp/t", 5, 1, PROFILE_GC_DETECT_THRESHOLD="inf"))
    assert "--gc-detect-threshold: must be finite, >= 0 ms, got inf" in reply["message"]


# --- 12: digits strictly; 15: nothing infinite -----------------------------------------------------


@pytest.mark.parametrize("text", ["\n100", " 100", "100 ", "1_000", "\u0661\u0660\u0660", "+100"])
def test_rotation_counts_are_plain_digits(daemon: Daemon, text: str) -> None:
    with stub(daemon) as s:
        request = pb.NpuMonitorRequest(start=True, export_type="Jsonl", jsonl_rotate_log_lines=text)
        why = refusal(lambda: s.NpuMonitor(request, timeout=10))
    assert why == f"--json-rotate-log-lines: must be an integer in 100..500000, got {text!r}"


@pytest.mark.parametrize("name", ["idle_timeout_s", "wait_registration_s"])
@pytest.mark.parametrize("value", [math.inf, math.nan, dynamic.MAX_SESSION_S + 1])
def test_dynamic_timeouts_are_finite_and_bounded(daemon: Daemon, name: str, value: float) -> None:
    why = refusal(lambda: first_reply(daemon, attach(**{name: value})))
    assert f"must be in 0..{dynamic.MAX_SESSION_S:g} seconds, got {value}" in why
