"""``dyno nputrace``: capture chosen steps of running processes (msMonitor's flags, plus targeting)."""

from __future__ import annotations

from argparse import Namespace

from msmonitor_contract.vocabulary import (
    DEFAULT_AIC_METRICS,
    DEFAULT_DURATION_MS,
    DEFAULT_NPU_ACTIVITIES,
    DEFAULT_PROFILER_LEVEL,
    DEFAULT_TRACE_EXPORT,
    split_list,
)

from ..cli import COLLECT, SYNC, TARGETING, WAIT_TIMEOUT, Command, Flag, field_flag, fill, true_false
from ..fleet.target import Target

FLAGS = (
    Flag(
        "--log-file", "log_file", str, None, "output directory on the traced node (absolute)", required=True
    ),
    Flag("--start-step", "start_step", int, -1, "first step to record; -1: the next step to begin"),
    Flag(
        "--iterations",
        "iterations",
        int,
        0,
        "steps to record; without it the trace is time-based (--duration-ms)",
    ),
    Flag("--duration-ms", "duration_ms", int, DEFAULT_DURATION_MS, "length of a time-based trace"),
    field_flag(
        "profile_start_time_ms", int, 0, "epoch ms to start a time-based trace (same instant on many hosts)"
    ),
    *TARGETING,
    Flag("--activities", "activities", split_list, DEFAULT_NPU_ACTIVITIES, "CPU, NPU or both"),
    Flag("--record-shapes", "record_shapes", bool, False, "operator input shapes and types"),
    Flag("--profile-memory", "profile_memory", bool, False, "operator memory"),
    Flag("--with-stack", "with_stack", bool, False, "Python call stacks"),
    Flag("--with-flops", "with_flops", bool, False, "operator FLOPs"),
    Flag("--with-modules", "with_modules", bool, False, "module hierarchy"),
    Flag("--analyse", "analyse", bool, False, "also write a summary: top operators, step times"),
    Flag("--async-mode", "async_mode", bool, False, "analyse in a subprocess (needs --analyse)"),
    Flag(
        "--profiler-level",
        "profiler_level",
        str,
        DEFAULT_PROFILER_LEVEL,
        "Level_none, Level0, Level1, Level2",
    ),
    Flag("--aic-metrics", "aic_metrics", str, DEFAULT_AIC_METRICS, "AI Core metrics (Ascend)"),
    Flag("--l2-cache", "l2_cache", bool, False, "L2 cache data (Ascend)"),
    Flag("--op-attr", "op_attr", bool, False, "operator attributes (Ascend)"),
    Flag("--msprof-tx", "msprof_tx", bool, False, "mstx markers (Ascend)"),
    Flag("--mstx-domain-include", "mstx_domain_include", split_list, None, "mstx domains to keep"),
    Flag("--mstx-domain-exclude", "mstx_domain_exclude", split_list, None, "mstx domains to drop"),
    Flag("--data-simplification", "data_simplification", true_false, "true", "true or false (Ascend)"),
    Flag("--export-type", "export_type", str, DEFAULT_TRACE_EXPORT, "Text or Db (Ascend)"),
    Flag("--gc-detect-threshold", "gc_detect_threshold", float, None, "ms; record GC above"),
    Flag("--host-sys", "host_sys", split_list, "None", "None or some of cpu,mem,disk,network,osrt"),
    Flag("--sys-io", "sys_io", bool, False, "NIC / RoCE data (Ascend)"),
    Flag("--sys-interconnection", "sys_interconnection", bool, False, "HCCS / PCIe data (Ascend)"),
    Flag(
        "--pause-monitor",
        "pause_monitor",
        bool,
        False,
        "a monitored process pauses its npu-monitor for the trace and resumes it with its own settings after",
    ),
    Flag("--wait", None, bool, False, "wait until every triggered process wrote its files"),
    WAIT_TIMEOUT,
    COLLECT,
    SYNC._replace(
        help="with --hosts: start the trace at one step on every host (with --iterations: the step is "
        "chosen from every host's processes' steps and rates, as --start-step) or, time-based, at one "
        "instant (sets --profile-start-time from the round trips); the answer states it"
    ),
)


def run(target: Target, args: Namespace) -> None:
    """Trace steps of running processes: torch_npu/MindSpore on Ascend, torch.profiler elsewhere.

    Example: dyno nputrace --start-step 120 --iterations 3 --log-file /data/traces --analyse --wait

    On many hosts, --sync starts the trace at one step (with --iterations: dyno picks the step from
    every host's processes) or at one instant (a time-based trace) everywhere:
      dyno --hosts 'node[001-016]' nputrace --job-id 77 --iterations 3 --log-file /data/traces --sync --wait
    """
    from dynoproto import dynolog_pb2 as pb
    from msmonitor_contract.kinds import NPUTRACE

    from ..tracing.start import start_trace

    request = fill(pb.NpuTraceRequest(), FLAGS, args)
    if request.iterations:  # msMonitor sends --duration-ms only with a time-based trace
        request.duration_ms = 0
    start_trace(target, args, request, NPUTRACE.check, lambda stub: stub.NpuTrace)


COMMAND = Command("nputrace", run, FLAGS, across=run)  # run fans out itself: trace_start.start_trace
