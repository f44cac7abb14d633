"""``dyno processes``: the processes registered with the daemon, one row each."""

from __future__ import annotations

import time
from argparse import Namespace
from typing import TYPE_CHECKING, List

from ..cli import JOB_ID, Command, fill
from ..output import as_dict, duration, print_json, table
from ..target import Target

if TYPE_CHECKING:
    from dynoproto import dynolog_pb2 as pb

FLAGS = (JOB_ID._replace(field="job_id"),)
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
    from dynoproto import dynolog_pb2 as pb

    from ..connection import connect

    with connect(target) as stub:
        reply = stub.ListProcesses(fill(pb.ListProcessesRequest(), FLAGS, args), timeout=target.timeout)
    if target.json:
        print_json(as_dict(reply)["processes"])
        return
    if not reply.processes:
        print(
            "No processes registered. Start jobs with MSMONITOR_USE_DAEMON=1 (plugin) or"
            " KINETO_USE_DAEMON=1, and the daemon with --enable-ipc-monitor."
        )
        return
    # Columns only some processes fill, shown when one does (a column of dashes otherwise): the service
    # profiler's switch, and who holds a process through `dyno dynamic`.
    optional = [
        (header, field)
        for header, field in (("SERVICE", "service"), ("HELD BY", "held_by"))
        if any(getattr(p, field) for p in reply.processes)
    ]
    headers = (*HEADERS, *(header for header, _ in optional))
    print(table(headers, [[*_row(p), *(getattr(p, f) or "-" for _, f in optional)] for p in reply.processes]))


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


COMMAND = Command("processes", run, FLAGS)
