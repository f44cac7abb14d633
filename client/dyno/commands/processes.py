"""``dyno processes``: the processes registered with the daemon, one row each."""

from __future__ import annotations

import time
from argparse import Namespace
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import waiting
from ..cli import JOB_ID, Command, Flag, fill
from ..fleet.target import Target
from ..output import as_dict, duration, print_json, table

if TYPE_CHECKING:
    from dynoproto import dynolog_pb2 as pb

FLAGS = (
    JOB_ID._replace(field="job_id"),
    Flag(
        "--wait-for",
        None,
        int,
        0,
        f"wait (up to {waiting.BOUND_S:.0f} s) until this many processes are registered, the daemon "
        "perhaps still starting: for a script that has just started the daemon and its jobs",
        minimum=0,
    ),
)
HEADERS = (
    "PID",
    "HOST PID",
    "JOB",
    "RANK",
    "LOCAL",
    "DEVICES",
    "BACKEND",
    "CLIENT",
    "AGE",
    "SEEN",
    "TRACE",
    "MONITOR",
)


def run(target: Target, args: Namespace) -> None:
    """List registered processes: pid (and host pid inside containers), job, rank, devices, client, state."""
    reply = listing(target, args)
    if target.json:
        print_json(to_json(reply))
        return
    if not reply.processes:
        print(
            "No processes registered. Start jobs with MSMONITOR_USE_DAEMON=1 (plugin) or"
            " KINETO_USE_DAEMON=1, and the daemon with --enable-ipc-monitor."
        )
        return
    optional = _optional(reply.processes)
    print(table(_headers(optional), [_full_row(p, optional) for p in reply.processes]))


def across(target: Target, args: Namespace) -> None:
    from ..fleet import fanout

    outcomes = fanout.gather(fanout.fleet(target), lambda one: listing(one, args), target.parallel)
    optional = _optional([p for o in outcomes if o.answer is not None for p in o.answer.processes])
    view = fanout.View(
        _headers(optional), lambda reply: [_full_row(p, optional) for p in reply.processes], to_json
    )
    fanout.show(target, outcomes, view)
    fanout.verdict(outcomes)


def ask(target: Target, args: Namespace) -> pb.ListProcessesResponse:
    from dynoproto import dynolog_pb2 as pb

    from ..edge.connection import connect

    with connect(target, "dyno processes") as stub:
        return stub.ListProcesses(fill(pb.ListProcessesRequest(), FLAGS, args), timeout=target.timeout)


def listing(target: Target, args: Namespace) -> pb.ListProcessesResponse:
    return wait_for(target, args) if args.wait_for else ask(target, args)


def wait_for(target: Target, args: Namespace) -> pb.ListProcessesResponse:
    def enough(reply: pb.ListProcessesResponse) -> Optional[str]:
        have = len(reply.processes)
        return None if have >= args.wait_for else f"{have} of --wait-for {args.wait_for} processes registered"

    return waiting.until(lambda: ask(target, args), enough)


def to_json(reply: pb.ListProcessesResponse) -> List[Dict[str, Any]]:
    return list(as_dict(reply)["processes"])


Column = Tuple[str, Callable[["pb.ProcessInfo"], str]]


def _optional(processes: Sequence[pb.ProcessInfo]) -> List[Column]:
    """Columns only some processes fill, shown when one does (a dash where it does not): the framework's
    monitor helpers folded into a process, the service profiler's switch, who holds it (`dyno dynamic`)."""
    return [(h, show) for h, show in OPTIONAL_COLUMNS if any(show(p) for p in processes)]


def _headers(optional: Sequence[Column]) -> Tuple[str, ...]:
    return (*HEADERS, *(header for header, _ in optional))


def _full_row(p: pb.ProcessInfo, optional: Sequence[Column]) -> List[str]:
    return [*_row(p), *(show(p) or "-" for _, show in optional)]


OPTIONAL_COLUMNS: Tuple[Column, ...] = (
    ("HELPERS", lambda p: ",".join(map(str, p.helper_pids))),
    ("SERVICE", lambda p: p.service),
    ("HELD BY", lambda p: p.held_by),
)


def _row(p: pb.ProcessInfo) -> List[str]:
    from dynoproto import dynolog_pb2 as pb

    def num(value: int) -> str:
        return "-" if value < 0 else str(value)

    clients = {
        pb.CLIENT_KIND_PLUGIN: "plugin",
        pb.CLIENT_KIND_KINETO: "kineto",
        pb.CLIENT_KIND_MSMONITOR: "msmonitor",
    }
    return [
        str(p.pid),
        str(p.host_pid) if p.host_pid != p.pid else "",
        str(p.job_id),
        num(p.rank),
        num(p.local_rank),
        ",".join(map(str, p.devices)) or "-",
        p.backend,
        "+".join(clients.get(c, "?") for c in p.clients),
        duration(time.time() - p.registered_at),
        duration(p.last_seen_s) + " ago",
        pb.TraceState.Name(p.trace_state).removeprefix("TRACE_STATE_").lower(),
        pb.MonitorState.Name(p.monitor_state).removeprefix("MONITOR_STATE_").lower(),
    ]


COMMAND = Command("processes", run, FLAGS, across)
