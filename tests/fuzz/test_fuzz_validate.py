"""Request validation never raises, names the flag of every field it refuses, and whatever it accepts
the daemon renders into config text that the plugin reads back to the same request."""

from __future__ import annotations

import struct
from typing import Any, Callable, List, Optional

import pytest
from fuzz_strategies import DYNAMIC, GPU_TRACE, NPU_MONITOR, NPU_TRACE, UNSAFE, messages, scaled, tricky_text
from hypothesis import event, example, given
from hypothesis import strategies as st

from dynolog.core.delivery import Delivery
from dynolog.core.traces import TraceStore
from dynolog.edge.rpc import convert
from dynolog.kinds.dynamic import DynamicWindow, Hold, Holds, SessionRequest
from dynolog.kinds.gputrace import GpuTrace
from dynolog.kinds.npumonitor import NpuMonitor
from dynolog.kinds.nputrace import NpuTrace
from dynoproto import dynolog_pb2 as pb
from msmonitor_contract import configtext, kinds, wire
from msmonitor_contract.kinds import GPUTRACE, NPUMONITOR, NPUTRACE
from msmonitor_contract.rules import FieldError
from msmonitor_contract.vocabulary import CommandKind
from msmonitor_plugin.kinds.base import TraceSpec
from msmonitor_plugin.monitor.config import ConfigError, MonitorConfig
from msmonitor_plugin.trace import spec as trace_spec

npu_traces = messages(pb.NpuTraceRequest, NPU_TRACE)
gpu_traces = messages(pb.GpuTraceRequest, GPU_TRACE)
npu_monitors = messages(pb.NpuMonitorRequest, NPU_MONITOR)
dynamic_requests = messages(pb.DynamicRequest, DYNAMIC)

VALIDATORS: List[Any] = [
    (NPUTRACE.check, npu_traces | messages(pb.NpuTraceRequest)),
    (GPUTRACE.check, gpu_traces | messages(pb.GpuTraceRequest)),
    (NPUMONITOR.check, npu_monitors | messages(pb.NpuMonitorRequest)),
    (kinds.DYNAMIC.check, (dynamic_requests | messages(pb.DynamicRequest)).map(lambda r: r.attach)),
]


@pytest.mark.parametrize(("check", "requests"), VALIDATORS, ids=lambda v: getattr(v, "__name__", ""))
@scaled(60)
@given(data=st.data())
def test_validation_returns_errors_that_name_their_flag(
    check: Callable[[Any], Any], requests: Any, data: Any
) -> None:
    errors = check(data.draw(requests))
    assert isinstance(errors, list)
    for error in errors:
        assert isinstance(error, FieldError)
        assert error.flag.startswith("--") and str(error).startswith(error.flag + ": ")


# --- what is accepted reaches the process intact ------------------------------------------------------

stores = (TraceStore(), Delivery())


def _command(kind: CommandKind, text: str) -> wire.Command:
    # Through the wire too: the command the process decodes is the one the daemon encoded.
    command = wire.Command(kind=kind.value, trace_id="123", config=configtext.with_trace_id(text, "123"))
    return wire.Command.from_payload(command.to_payload())


def _nputrace_spec(request: pb.NpuTraceRequest) -> TraceSpec:
    """What the process reads from the daemon's text for *request*, through the gRPC edge."""
    text = NpuTrace(*stores).text(convert.command(NpuTrace, request))
    return trace_spec.parse(_command(CommandKind.NPUTRACE, text))


def _gputrace_spec(request: pb.GpuTraceRequest) -> TraceSpec:
    text = GpuTrace(*stores).text(convert.command(GpuTrace, request))
    return trace_spec.parse(_command(CommandKind.GPUTRACE, text))


@scaled(150)
@given(npu_traces)
def test_an_accepted_nputrace_reads_back_in_the_process(request: pb.NpuTraceRequest) -> None:
    errors = NPUTRACE.check(request)
    event("accepted" if not errors else "refused")
    if errors:
        return
    spec = trace_spec.parse(
        _command(CommandKind.NPUTRACE, NpuTrace(*stores).text(convert.command(NpuTrace, request)))
    )
    assert spec.log_file == request.log_file
    assert spec.activities == list(request.activities)
    if request.iterations > 0:
        assert (spec.iterations, spec.start_step) == (request.iterations, request.start_step)
    else:
        assert (spec.duration_ms, spec.start_time_ms) == (request.duration_ms, request.profile_start_time_ms)
    assert (spec.record_shapes, spec.profile_memory, spec.with_stack, spec.with_flops, spec.with_modules) == (
        request.record_shapes,
        request.profile_memory,
        request.with_stack,
        request.with_flops,
        request.with_modules,
    )
    assert spec.analyse == request.analyse
    for key, values in (
        ("PROFILE_MSTX_DOMAIN_INCLUDE", request.mstx_domain_include),
        ("PROFILE_MSTX_DOMAIN_EXCLUDE", request.mstx_domain_exclude),
        ("PROFILE_HOST_SYS", request.host_sys),
    ):
        assert configtext.LIST.read(spec.npu[key]) == list(values)


@scaled(100)
@given(gpu_traces)
def test_an_accepted_gputrace_reads_back_in_the_process(request: pb.GpuTraceRequest) -> None:
    errors = GPUTRACE.check(request)
    event("accepted" if not errors else "refused")
    if errors:
        return
    spec = trace_spec.parse(
        _command(CommandKind.GPUTRACE, GpuTrace(*stores).text(convert.command(GpuTrace, request)))
    )
    assert spec.log_file == request.log_file
    if request.iterations > 0:
        assert spec.iterations == request.iterations
        assert spec.start_roundup == max(1, request.profile_start_iteration_roundup)
    else:
        assert (spec.duration_ms, spec.start_time_ms) == (request.duration_ms, request.profile_start_time_ms)
    assert spec.profile_memory == request.profile_memory


@scaled(150)
@given(npu_monitors)
def test_an_accepted_npu_monitor_command_reads_back_in_the_process(request: pb.NpuMonitorRequest) -> None:
    errors = NPUMONITOR.check(request)
    event("accepted" if not errors else "refused")
    if errors:
        return
    text = _command(
        CommandKind.NPUMONITOR, NpuMonitor(Delivery()).text(convert.command(NpuMonitor, request))
    ).config
    try:
        config = MonitorConfig.parse(configtext.parse(text))
    except ConfigError as exc:
        raise AssertionError(f"the daemon accepted what the plugin refuses: {exc}") from None
    assert (config.start, config.stop, config.log_dir) == (request.start, request.stop, request.log_file)
    assert same_float32(config.duration_s, request.duration_s)
    if request.report_interval_s:
        assert config.report_interval_s == request.report_interval_s
    assert config.filter.text == request.filter


@scaled(80)
@given(dynamic_requests)
def test_an_accepted_dynamic_window_reads_back_in_the_process(request: pb.DynamicRequest) -> None:
    errors = kinds.DYNAMIC.check(request.attach)
    event("accepted" if not errors else "refused")
    if errors:
        return
    window = DynamicWindow(*stores, Holds())
    session = SessionRequest(convert.attach(request.attach), Hold(1, "fuzz", "fuzz"))
    spec = trace_spec.parse(_command(CommandKind.DYNAMIC, window.text(session)))
    o = request.attach.options
    assert spec.log_file == request.attach.output
    assert spec.activities == list(o.activities)
    assert (spec.record_shapes, spec.profile_memory, spec.with_stack, spec.with_modules) == (
        o.record_shapes,
        o.profile_memory,
        o.with_stack,
        o.with_modules,
    )
    assert not trace_spec.is_stop(_command(CommandKind.DYNAMIC, window.text(session)))
    assert trace_spec.is_stop(_command(CommandKind.DYNAMIC, window.stop_text()))


@scaled(100)
@given(st.floats(width=32))
def test_any_accepted_duration_reads_back_in_the_process(duration_s: float) -> None:
    """Floats are where text formats differ most (1e-05, inf): one field, every float."""
    request = pb.NpuMonitorRequest(start=True, duration_s=duration_s)
    if NPUMONITOR.check(request):
        return
    text = NpuMonitor(Delivery()).text(convert.command(NpuMonitor, request))
    try:
        config = MonitorConfig.parse(configtext.parse(text))
    except ConfigError as exc:
        raise AssertionError(f"the daemon accepted what the plugin refuses: {exc}") from None
    assert same_float32(config.duration_s, request.duration_s)


def same_float32(read: float, sent: float) -> bool:
    """The daemon writes a proto float as the shortest decimal that is the same float32 (0.1 as typed,
    not 0.10000000149011612): what the process reads is that float32, not its every digit."""
    return struct.pack("<f", read) == struct.pack("<f", sent)


def _read_path(kind: str, path: str) -> Optional[str]:
    """*path* as the output of a request of *kind* that is valid otherwise; None if validation refuses it,
    else the path the process reads from the daemon's config text."""
    if kind == "npu-monitor":
        monitor = pb.NpuMonitorRequest(start=True, log_file=path)
        if NPUMONITOR.check(monitor):
            return None
        text = NpuMonitor(Delivery()).text(convert.command(NpuMonitor, monitor))
        return MonitorConfig.parse(configtext.parse(text)).log_dir
    if kind == "dynamic":
        attach = pb.DynamicAttach(output=path, targets=pb.Targets(pids=[1]), options={"activities": ["CPU"]})
        if kinds.DYNAMIC.check(attach):
            return None
        text = DynamicWindow(*stores, Holds()).text(
            SessionRequest(convert.attach(attach), Hold(1, "fuzz", "fuzz"))
        )
        return trace_spec.parse(_command(CommandKind.DYNAMIC, text)).log_file
    if kind == "nputrace":
        npu = pb.NpuTraceRequest(log_file=path, activities=["CPU"], duration_ms=1)
        if NPUTRACE.check(npu):
            return None
        return trace_spec.parse(
            _command(CommandKind.NPUTRACE, NpuTrace(*stores).text(convert.command(NpuTrace, npu)))
        ).log_file
    gpu = pb.GpuTraceRequest(log_file=path, duration_ms=1)
    if GPUTRACE.check(gpu):
        return None
    return trace_spec.parse(
        _command(CommandKind.GPUTRACE, GpuTrace(*stores).text(convert.command(GpuTrace, gpu)))
    ).log_file


@scaled(150)
@given(
    st.sampled_from(["nputrace", "gputrace", "npu-monitor", "dynamic"]),
    st.text(st.sampled_from([*UNSAFE, *" \t\u00a0a/"]), max_size=4) | tricky_text,
    st.text(max_size=3),
)
def test_any_accepted_output_path_reads_back_unchanged(kind: str, tricky: str, tail: str) -> None:
    """Paths are free text from the network that becomes a KEY=VALUE line: the characters that end or
    trim a line (form feed, U+2028, a trailing space) must be refused, or the process writes elsewhere."""
    path = "/tmp/fuzz/" + tricky + tail
    try:
        read = _read_path(kind, path)
    except (configtext.ConfigTextError, ConfigError) as exc:
        raise AssertionError(f"the daemon accepted {path!r}, which the process cannot read: {exc}") from None
    assert read is None or read == path


@scaled(100)
@given(st.lists(st.sampled_from(["None", "a", "b c", " d", "e,f", ""]) | tricky_text, max_size=3))
@example(["None"])
def test_any_accepted_list_of_names_reads_back_unchanged(names: List[str]) -> None:
    """Names become one comma list in the config text, where "None" means no names at all."""
    request = pb.NpuTraceRequest(
        log_file="/tmp/fuzz", activities=["CPU"], duration_ms=1, mstx_domain_include=names
    )
    if NPUTRACE.check(request):
        return
    spec = trace_spec.parse(
        _command(CommandKind.NPUTRACE, NpuTrace(*stores).text(convert.command(NpuTrace, request)))
    )
    assert configtext.LIST.read(spec.npu["PROFILE_MSTX_DOMAIN_INCLUDE"]) == names
