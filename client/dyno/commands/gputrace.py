"""``dyno gputrace``: dynolog's on-demand Kineto trace, for stock PyTorch and plugin processes alike."""

from __future__ import annotations

from typing import Optional

import typer

from dynoproto import dynolog_pb2 as pb
from dynoproto import validate

from ..connection import Target, connect
from . import tracing


def run(
    ctx: typer.Context,
    log_file: str = typer.Option(
        ..., "--log-file", help="trace file on the traced node; _<pid> is inserted before .json"
    ),
    duration_ms: int = typer.Option(500, "--duration-ms", help="length of the trace (without --iterations)"),
    iterations: int = typer.Option(-1, "--iterations", help="steps to record (> 0 selects iteration mode)"),
    profile_start_time: int = typer.Option(0, "--profile-start-time", help="epoch ms to start; 0: now"),
    profile_start_iteration_roundup: int = typer.Option(
        1, "--profile-start-iteration-roundup", help="start at the next multiple of this step"
    ),
    job_id: int = tracing.JOB_ID,
    pids: str = tracing.PIDS,
    rank_list: Optional[str] = tracing.RANK_LIST,
    process_limit: int = tracing.PROCESS_LIMIT,
    record_shapes: bool = typer.Option(False, "--record-shapes", help="operator input shapes"),
    profile_memory: bool = typer.Option(False, "--profile-memory", help="memory profile (duration traces)"),
    with_stacks: bool = typer.Option(False, "--with-stacks", "--with-stack", help="Python call stacks"),
    with_flops: bool = typer.Option(False, "--with-flops", help="operator FLOPs"),
    with_modules: bool = typer.Option(False, "--with-modules", help="module hierarchy"),
    fail_on_no_process: bool = typer.Option(
        False, "--fail-on-no-process", help="accepted for dynolog scripts (nothing matched always exits 1)"
    ),
    wait: bool = typer.Option(False, "--wait", help="wait until every triggered process wrote its file"),
    wait_timeout: float = tracing.WAIT_TIMEOUT,
) -> None:
    """Trace running PyTorch processes the way dynolog does (stock Kineto writes the file itself).

    Example: dyno gputrace --log-file /tmp/t.json --iterations 5 --wait
    """
    target: Target = ctx.obj
    request = pb.GpuTraceRequest(
        targets=tracing.targets(job_id, pids, rank_list, process_limit),
        log_file=tracing.absolute_log_file(target, log_file),
        duration_ms=duration_ms,
        iterations=max(iterations, 0),
        profile_start_time_ms=profile_start_time,
        profile_start_iteration_roundup=profile_start_iteration_roundup,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stacks,
        with_flops=with_flops,
        with_modules=with_modules,
    )
    tracing.check(validate.gpu_trace(request))
    with connect(target) as stub:
        tracing.submit(target, lambda timeout: stub.GpuTrace(request, timeout=timeout), wait, wait_timeout)
