"""``dyno trace ID``: the lifecycle of one trace, per process — on any later call."""

from __future__ import annotations

import typer

from dynoproto import dynolog_pb2 as pb

from ..connection import Target, connect
from ..exits import EXIT_FAILED
from ..output import as_dict, print_json
from . import tracing


def run(
    ctx: typer.Context,
    trace_id: str = typer.Argument(..., help="the id nputrace or gputrace printed"),
    wait: bool = typer.Option(False, "--wait", help="wait until every process finished or failed"),
    wait_timeout: float = tracing.WAIT_TIMEOUT,
) -> None:
    """Show where one trace stands in each process: phase, steps, files or error."""
    target: Target = ctx.obj
    if wait:
        info = tracing.watch(target, trace_id, wait_timeout, quiet=target.json)
    else:
        with connect(target) as stub:
            info = stub.GetTrace(pb.GetTraceRequest(trace_id=trace_id), timeout=target.timeout)
    if target.json:
        print_json(as_dict(info))
    else:
        tracing.print_trace(info)
    if any(p.phase == pb.TRACE_PHASE_FAILED for p in info.processes):
        raise typer.Exit(EXIT_FAILED)
