"""``dyno processes``: the processes registered with the daemon, one row each."""

from __future__ import annotations

import time
from argparse import Namespace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from msmonitor_contract.targets import Targets

from .. import waiting
from ..declared import JOB_ID
from ..exits import EXIT_FAILED, CliError
from ..flags import Command, Flag
from ..fleet.target import Target
from ..model.daemon import ProcessInfo
from ..output import as_dict, duration, print_json, table

Listing = Tuple[ProcessInfo, ...]

FLAGS = (
    JOB_ID._replace(field="job_id"),
    Flag(
        "--wait-for",
        None,
        int,
        0,
        f"wait (up to {waiting.BOUND_S:.0f} s) until this many processes are registered, the daemon "
        "perhaps still starting: for a script that has just started the daemon and its jobs (fails at once "
        "when the daemon's IPC is off)",
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
    processes = listing(target, args)
    if target.json:
        print_json(to_json(processes))
        return
    if not processes:
        print(
            "No processes registered. Start jobs with MSMONITOR_USE_DAEMON=1 (plugin) or"
            " KINETO_USE_DAEMON=1, and the daemon with --enable-ipc-monitor."
        )
        return
    optional = _optional(processes)
    print(table(_headers(optional), [_full_row(p, optional) for p in processes]))


def across(target: Target, args: Namespace) -> None:
    from ..fleet import fanout

    outcomes = fanout.gather(fanout.fleet(target), lambda one: listing(one, args), target.parallel)
    optional = _optional([p for o in outcomes if o.answer is not None for p in o.answer])
    view = fanout.View(_headers(optional), lambda listed: [_full_row(p, optional) for p in listed], to_json)
    fanout.show(target, outcomes, view)
    fanout.verdict(outcomes)


def ask(target: Target, args: Namespace) -> Listing:
    from ..edge.rpc import Daemon

    return Daemon(target, "dyno processes").processes(Targets(job_id=args.job_id))


def listing(target: Target, args: Namespace) -> Listing:
    return wait_for(target, args) if args.wait_for else ask(target, args)


def wait_for(target: Target, args: Namespace) -> Listing:
    """The listing once --wait-for processes are registered; at once a failure when the daemon cannot
    register any (started without --enable-ipc-monitor), not a minute's silent wait."""
    ipc_checked: List[bool] = []  # asked once, when the first listing is short

    def asked() -> Listing:
        processes = ask(target, args)
        if len(processes) < args.wait_for and not ipc_checked:
            _refuse_without_ipc(target)
            ipc_checked.append(True)
        return processes

    def enough(processes: Listing) -> Optional[str]:
        have = len(processes)
        return None if have >= args.wait_for else f"{have} of --wait-for {args.wait_for} processes registered"

    return waiting.until(asked, enough)


def _refuse_without_ipc(target: Target) -> None:
    from ..edge.rpc import Daemon
    from ..model.daemon import GetStatusResponse

    status = Daemon(target, "dyno processes").status()
    if isinstance(status, GetStatusResponse) and not status.ipc_enabled:
        raise CliError(
            f"dynolog at {target.address} has IPC off, so no process can register: start it with "
            "--enable-ipc-monitor (--wait-for would wait in vain)",
            EXIT_FAILED,
        )


def to_json(processes: Listing) -> List[Dict[str, Any]]:
    return [as_dict(p) for p in processes]


Column = Tuple[str, Callable[[ProcessInfo], str]]


def _optional(processes: Sequence[ProcessInfo]) -> List[Column]:
    """Columns only some processes fill, shown when one does (a dash where it does not): the framework's
    monitor helpers folded into a process, the service profiler's switch, who holds it (`dyno dynamic`)."""
    return [(h, show) for h, show in OPTIONAL_COLUMNS if any(show(p) for p in processes)]


def _headers(optional: Sequence[Column]) -> Tuple[str, ...]:
    return (*HEADERS, *(header for header, _ in optional))


def _full_row(p: ProcessInfo, optional: Sequence[Column]) -> List[str]:
    return [*_row(p), *(show(p) or "-" for _, show in optional)]


OPTIONAL_COLUMNS: Tuple[Column, ...] = (
    ("HELPERS", lambda p: ",".join(map(str, p.helper_pids))),
    ("SERVICE", lambda p: p.service),
    ("HELD BY", lambda p: p.held_by),
)


def _row(p: ProcessInfo) -> List[str]:
    def num(value: int) -> str:
        return "-" if value < 0 else str(value)

    return [
        str(p.pid),
        str(p.host_pid) if p.host_pid != p.pid else "",
        str(p.job_id),
        num(p.rank),
        num(p.local_rank),
        ",".join(map(str, p.devices)) or "-",
        p.backend,
        "+".join(c.value for c in p.clients),
        duration(time.time() - p.registered_at),
        duration(p.last_seen_s) + " ago",
        p.trace_state.value,
        p.monitor_state.value,
    ]


COMMAND = Command("processes", run, FLAGS, across)
