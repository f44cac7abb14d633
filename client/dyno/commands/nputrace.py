"""``dyno nputrace``: capture chosen steps of running processes (msMonitor's flags, plus targeting)."""

from __future__ import annotations

from typing import Optional

import typer

from dynoproto import dynolog_pb2 as pb
from dynoproto import validate

from ..connection import Target, connect
from . import tracing


def _list(text: Optional[str]) -> list:
    return [v for v in (text or "").split(",") if v and v != "None"]


def run(
    ctx: typer.Context,
    log_file: str = typer.Option(..., "--log-file", help="output directory on the traced node (absolute)"),
    start_step: int = typer.Option(
        -1, "--start-step", help="first step to record; -1: the next step to begin"
    ),
    iterations: int = typer.Option(
        0, "--iterations", help="steps to record; without it the trace is time-based (--duration-ms)"
    ),
    duration_ms: int = typer.Option(500, "--duration-ms", help="length of a time-based trace"),
    profile_start_time: int = typer.Option(
        0, "--profile-start-time", help="epoch ms to start a time-based trace (same instant on many hosts)"
    ),
    job_id: int = tracing.JOB_ID,
    pids: str = tracing.PIDS,
    rank_list: Optional[str] = tracing.RANK_LIST,
    process_limit: int = tracing.PROCESS_LIMIT,
    activities: str = typer.Option("CPU,NPU", "--activities", help="CPU, NPU or both"),
    record_shapes: bool = typer.Option(False, "--record-shapes", help="operator input shapes and types"),
    profile_memory: bool = typer.Option(False, "--profile-memory", help="operator memory"),
    with_stack: bool = typer.Option(False, "--with-stack", help="Python call stacks"),
    with_flops: bool = typer.Option(False, "--with-flops", help="operator FLOPs"),
    with_modules: bool = typer.Option(False, "--with-modules", help="module hierarchy"),
    analyse: bool = typer.Option(False, "--analyse", help="also write a summary: top operators, step times"),
    async_mode: bool = typer.Option(False, "--async-mode", help="analyse in a subprocess (needs --analyse)"),
    profiler_level: str = typer.Option(
        "Level0", "--profiler-level", help="Level_none, Level0, Level1, Level2"
    ),
    aic_metrics: str = typer.Option("AiCoreNone", "--aic-metrics", help="AI Core metrics (Ascend)"),
    l2_cache: bool = typer.Option(False, "--l2-cache", help="L2 cache data (Ascend)"),
    op_attr: bool = typer.Option(False, "--op-attr", help="operator attributes (Ascend)"),
    msprof_tx: bool = typer.Option(False, "--msprof-tx", help="mstx markers (Ascend)"),
    mstx_domain_include: Optional[str] = typer.Option(
        None, "--mstx-domain-include", help="mstx domains to keep"
    ),
    mstx_domain_exclude: Optional[str] = typer.Option(
        None, "--mstx-domain-exclude", help="mstx domains to drop"
    ),
    data_simplification: str = typer.Option("true", "--data-simplification", help="true or false (Ascend)"),
    export_type: str = typer.Option("Text", "--export-type", help="Text or Db (Ascend)"),
    gc_detect_threshold: Optional[float] = typer.Option(
        None, "--gc-detect-threshold", help="ms; record GC above"
    ),
    host_sys: str = typer.Option("None", "--host-sys", help="None or some of cpu,mem,disk,network,osrt"),
    sys_io: bool = typer.Option(False, "--sys-io", help="NIC / RoCE data (Ascend)"),
    sys_interconnection: bool = typer.Option(
        False, "--sys-interconnection", help="HCCS / PCIe data (Ascend)"
    ),
    wait: bool = typer.Option(False, "--wait", help="wait until every triggered process wrote its files"),
    wait_timeout: float = tracing.WAIT_TIMEOUT,
) -> None:
    """Trace steps of running processes: torch_npu/MindSpore on Ascend, torch.profiler elsewhere.

    Example: dyno nputrace --start-step 120 --iterations 3 --log-file /data/traces --analyse --wait
    """
    target: Target = ctx.obj
    if data_simplification not in ("true", "false"):
        tracing.check(
            [
                validate.FieldError(
                    "data_simplification", f"must be true or false, got {data_simplification!r}"
                )
            ]
        )
    request = pb.NpuTraceRequest(
        targets=tracing.targets(job_id, pids, rank_list, process_limit),
        log_file=tracing.absolute_log_file(target, log_file),
        start_step=start_step,
        iterations=iterations,
        duration_ms=duration_ms if iterations == 0 else 0,
        profile_start_time_ms=profile_start_time,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
        with_flops=with_flops,
        with_modules=with_modules,
        analyse=analyse,
        async_mode=async_mode,
        activities=_list(activities),
        profiler_level=profiler_level,
        aic_metrics=aic_metrics,
        l2_cache=l2_cache,
        op_attr=op_attr,
        msprof_tx=msprof_tx,
        mstx_domain_include=_list(mstx_domain_include),
        mstx_domain_exclude=_list(mstx_domain_exclude),
        data_simplification=data_simplification == "true",
        export_type=export_type,
        gc_detect_threshold=gc_detect_threshold,
        host_sys=_list(host_sys),
        sys_io=sys_io,
        sys_interconnection=sys_interconnection,
    )
    tracing.check(validate.npu_trace(request))
    with connect(target) as stub:
        tracing.submit(target, lambda timeout: stub.NpuTrace(request, timeout=timeout), wait, wait_timeout)
