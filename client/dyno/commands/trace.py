"""``dyno trace ID``: the lifecycle of one trace, per process — on any later call."""

from __future__ import annotations

from argparse import Namespace

from ..cli import WAIT_TIMEOUT, Command, Flag, fill
from ..exits import CliError
from ..output import as_dict, print_json
from ..target import Target

FLAGS = (
    Flag("trace_id", "trace_id", str, None, "the id nputrace or gputrace printed"),
    Flag("--wait", None, bool, False, "wait until every process finished or failed"),
    WAIT_TIMEOUT,
)


def run(target: Target, args: Namespace) -> None:
    """Show where one trace stands in each process: phase, steps, files or error."""
    from dynoproto import dynolog_pb2 as pb

    from .. import requests
    from ..connection import connect

    request = fill(pb.GetTraceRequest(), FLAGS, args)
    if args.wait:
        info = requests.watch(target, request.trace_id, args.wait_timeout, quiet=target.json)
    else:
        with connect(target) as stub:
            info = stub.GetTrace(request, timeout=target.timeout)
    if target.json:
        print_json(as_dict(info))
    else:
        requests.print_trace(info)
    failed = [str(p.pid) for p in info.processes if p.phase == pb.TRACE_PHASE_FAILED]
    if failed:
        raise CliError(f"trace {info.trace_id} failed in pid {', '.join(failed)}")


COMMAND = Command("trace", run, FLAGS)
