"""The config text each command kind stages: exactly msMonitor's (and dynolog's) keys, in their order,
and read back by the plugin through the same key table into what was asked for."""

from __future__ import annotations

from dynolog.core.delivery import Delivery
from dynolog.core.traces import TraceStore
from dynolog.edge.rpc import convert
from dynolog.kinds.gputrace import GpuTrace
from dynolog.kinds.npumonitor import NpuMonitor
from dynolog.kinds.nputrace import NpuTrace
from dynoproto import dynolog_pb2 as pb
from msmonitor_contract import configtext, wire
from msmonitor_contract.activity import Kind
from msmonitor_contract.kinds import NPUTRACE
from msmonitor_contract.vocabulary import CommandKind
from msmonitor_plugin.monitor.config import MonitorConfig
from msmonitor_plugin.trace.spec import parse

# What msMonitor's dyno sends for `nputrace --start-step 120 --iterations 3 --record-shapes --analyse
# --rank-list 0,1` (reference/msmonitor.md §2.2): torch_npu and MindSpore parse exactly this.
NPUTRACE_TEXT = """\
ACTIVITIES_LOG_FILE=/data/t
PROFILE_START_ITERATION=0
PROFILE_START_STEP=120
ACTIVITIES_ITERATIONS=3
PROFILE_RECORD_SHAPES=true
PROFILE_PROFILE_MEMORY=false
PROFILE_WITH_STACK=false
PROFILE_WITH_FLOPS=false
PROFILE_WITH_MODULES=false
PROFILE_ACTIVITIES=CPU,NPU
PROFILE_ANALYSE=true
PROFILE_ASYNC_MODE=false
PROFILE_PROFILER_LEVEL=Level0
PROFILE_AIC_METRICS=AiCoreNone
PROFILE_L2_CACHE=false
PROFILE_OP_ATTR=false
PROFILE_MSPROF_TX=false
PROFILE_GC_DETECT_THRESHOLD=None
PROFILE_DATA_SIMPLIFICATION=true
PROFILE_EXPORT_TYPE=Text
PROFILE_HOST_SYS=None
PROFILE_SYS_IO=false
PROFILE_SYS_INTERCONNECTION=false
PROFILE_MSTX_DOMAIN_INCLUDE=None
PROFILE_MSTX_DOMAIN_EXCLUDE=None
PROFILE_IS_RANK=true
PROFILE_RANK_LIST=0,1"""

GPUTRACE_TEXT = """\
ACTIVITIES_LOG_FILE=/tmp/t.json
PROFILE_START_TIME=0
ACTIVITIES_DURATION_MSECS=700
PROFILE_REPORT_INPUT_SHAPES=false
PROFILE_PROFILE_MEMORY=true
PROFILE_MEMORY=true
PROFILE_MEMORY_DURATION_MSECS=700
PROFILE_WITH_STACK=true
PROFILE_WITH_FLOPS=false
PROFILE_WITH_MODULES=false"""

NPUMONITOR_TEXT = """\
NPU_MONITOR_START=true
NPU_MONITOR_STOP=false
REPORT_INTERVAL_S=10
DURATION=0.0
MSPTI_ACTIVITY_KIND=Kernel,API
NPU_MONITOR_LOG_FILE=
NPU_MONITOR_EXPORT_TYPE=DB
JSONL_ROTATE_LOG_LINES=
JSONL_ROTATE_LOG_FILES=
NPU_MONITOR_FILTER=Kernel:mat
TOP_N=5"""


def command(kind: CommandKind, text: str) -> wire.Command:
    return wire.Command(kind=kind.value, trace_id="1", config=configtext.with_trace_id(text, "1"))


def test_nputrace_text_is_msmonitors_and_the_plugin_reads_it_back():
    request = pb.NpuTraceRequest(
        log_file="/data/t",
        start_step=120,
        iterations=3,
        record_shapes=True,
        activities=["CPU", "NPU"],
        targets=pb.Targets(ranks=[0, 1]),
        analyse=True,
        data_simplification=True,
    )
    text = NpuTrace(TraceStore(), Delivery()).text(convert.command(NpuTrace, request))
    assert text == NPUTRACE_TEXT
    spec = parse(command(CommandKind.NPUTRACE, text))
    assert (spec.log_file, spec.start_step, spec.iterations) == ("/data/t", 120, 3)
    assert (spec.record_shapes, spec.analyse, spec.activities) == (True, True, ["CPU", "NPU"])
    assert spec.npu["PROFILE_RANK_LIST"] == "0,1" and spec.npu["PROFILE_EXPORT_TYPE"] == "Text"


def test_gputrace_text_is_dynologs_and_the_plugin_reads_it_back():
    request = pb.GpuTraceRequest(
        log_file="/tmp/t.json", duration_ms=700, profile_memory=True, with_stack=True
    )
    text = GpuTrace(TraceStore(), Delivery()).text(convert.command(GpuTrace, request))
    assert text == GPUTRACE_TEXT
    spec = parse(command(CommandKind.GPUTRACE, text))
    assert (spec.log_file, spec.step_based, spec.duration_ms) == ("/tmp/t.json", False, 700)
    assert (spec.profile_memory, spec.with_stack, spec.with_flops) == (True, True, False)


def test_npu_monitor_text_is_msmonitors_and_the_plugin_reads_it_back():
    request = pb.NpuMonitorRequest(
        start=True, report_interval_s=10, activity_kinds=["Kernel", "API"], filter="Kernel:mat", top_n=5
    )
    text = NpuMonitor(Delivery()).text(convert.command(NpuMonitor, request))
    assert text == NPUMONITOR_TEXT
    config = MonitorConfig.parse(configtext.parse(text))
    assert (config.start, config.stop, config.report_interval_s, config.top_n) == (True, False, 10, 5)
    assert config.kinds == frozenset({Kind.KERNEL, Kind.API}) and config.filter.text == "Kernel:mat"


def test_a_float_reaches_the_text_as_the_user_typed_it_not_as_float32_holds_it():
    request = pb.NpuMonitorRequest(start=True, duration_s=0.1)  # float32: 0.10000000149011612
    text = NpuMonitor(Delivery()).text(convert.command(NpuMonitor, request))
    assert "\nDURATION=0.1\n" in text


def test_every_key_a_policy_writes_is_in_its_table():
    """render() refuses a key its table does not have: a misspelling fails here, not in a job."""
    try:
        configtext.render(NPUTRACE.keys, {"PROFILE_START_STPE": 1})
    except KeyError as exc:
        assert "PROFILE_START_STPE" in str(exc)
    else:
        raise AssertionError("a key outside the table was rendered")
