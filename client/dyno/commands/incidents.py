"""``dyno incidents``: what npu-monitor's ``--auto-trace`` detected, where, the evidence, the trace taken."""

from __future__ import annotations

import time
from argparse import Namespace
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..cli import JOB_ID, Command, Flag, fill
from ..exits import EXIT_USAGE, CliError
from ..output import as_dict, duration, print_json, rank_text, table
from ..target import Target

if TYPE_CHECKING:
    from dynoproto import dynolog_pb2 as pb

FLAGS = (
    Flag(
        "what",
        None,
        str,
        None,
        "nothing: the list; 'show ID': one incident in full",
        repeat=True,
        usage="[show ID]",
    ),
    JOB_ID._replace(field="job_id"),
    Flag("--limit", "limit", int, 0, "only the most recent this many (0: all the daemon keeps)", minimum=0),
)
HEADERS = ("ID", "AGE", "JOB", "RANK", "PID", "DETECTION", "KIND", "NAME", "SLOWER", "ACTION")


def run(target: Target, args: Namespace) -> None:
    """Incidents npu-monitor's --auto-trace raised on this node, oldest first; 'show ID' for one.

    Example: dyno incidents
             dyno incidents show 17
    On many hosts: dyno --hosts 'node[001-016]' incidents
    """
    incident_id = _shown(args)
    if incident_id is not None:
        info = get(target, incident_id)
        print_json(as_dict(info)) if target.json else print(show_text(info))
        return
    reply = ask(target, args)
    if target.json:
        print_json(to_json(reply))
    elif not reply.incidents:
        print("No incidents. Detection runs where monitoring started with --auto-trace (dyno npu-monitor).")
    else:
        print(table(HEADERS, rows(reply)))


def across(target: Target, args: Namespace) -> None:
    from .. import fanout

    incident_id = _shown(args)
    if incident_id is not None:  # each daemon numbers its own: the hosts without this one say so
        view = fanout.View(HEADERS, lambda info: [_row(info)], as_dict)
        return fanout.run(target, lambda one: get(one, incident_id), view)
    fanout.run(target, lambda one: ask(one, args), fanout.View(HEADERS, rows, to_json))


def ask(target: Target, args: Namespace) -> pb.ListIncidentsResponse:
    from dynoproto import dynolog_pb2 as pb

    from ..connection import connect

    with connect(target, "dyno incidents") as stub:
        return stub.ListIncidents(fill(pb.ListIncidentsRequest(), FLAGS, args), timeout=target.timeout)


def get(target: Target, incident_id: int) -> pb.IncidentInfo:
    from dynoproto import dynolog_pb2 as pb

    from ..connection import connect

    with connect(target, "dyno incidents") as stub:
        return stub.GetIncident(pb.GetIncidentRequest(id=incident_id), timeout=target.timeout)


def to_json(reply: pb.ListIncidentsResponse) -> List[Dict[str, Any]]:
    return list(as_dict(reply)["incidents"])


def rows(reply: pb.ListIncidentsResponse) -> List[List[str]]:
    return [_row(i) for i in reply.incidents]


def show_text(i: pb.IncidentInfo) -> str:
    """One incident: who, what, baseline against now per name, the trace's files, the timeline."""
    where = "host" if i.device < 0 else f"device {i.device}"
    lines = [
        f"incident {i.id} on {i.hostname}, {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(i.at))}",
        f"  job {i.job_id}, rank {rank_text(i.rank)}, pid {i.pid}",
        f"  {i.detection}: {i.kind} {i.name} ({where}) {_ratio(i)} slower for {i.intervals} intervals "
        f"(report {i.report_seq})",
        f"  action: {i.action}",
    ]
    if i.trace_id:
        lines.append(f"  trace {i.trace_id}: {len(i.trace_files)} file(s)")
        lines += [f"    {f}" for f in i.trace_files]
    if i.figures:
        reference = "PEERS us" if i.detection == "straggler" else "BASELINE us"
        figures = [
            [
                f.name,
                f"{f.baseline_ns / 1e3:.1f}",
                f"{f.current_ns / 1e3:.1f}",
                _times(f.current_ns, f.baseline_ns),
            ]
            for f in i.figures
        ]
        lines += ["", table(("NAME", reference, "NOW us", "RATIO"), figures)]
    lines += ["", "timeline:"]
    lines += [f"  {time.strftime('%H:%M:%S', time.localtime(e.at))}  {e.what}" for e in i.timeline]
    return "\n".join(lines)


def _row(i: pb.IncidentInfo) -> List[str]:
    return [
        str(i.id),
        duration(time.time() - i.at),
        str(i.job_id),
        rank_text(i.rank),
        str(i.pid),
        i.detection,
        i.kind,
        i.name,
        _ratio(i),
        i.action,
    ]


def _ratio(i: pb.IncidentInfo) -> str:
    return _times(i.current_ns, i.baseline_ns)


def _times(current: float, baseline: float) -> str:
    return f"{current / baseline:.2f}x" if baseline > 0 else "-"


def _shown(args: Namespace) -> Optional[int]:
    """The ID of ``show ID``; None for the list."""
    words = args.what or []
    if not words:
        return None
    if len(words) == 2 and words[0] == "show" and words[1].isdigit():
        return int(words[1])
    raise CliError(f"expected nothing or 'show ID', got {' '.join(words)!r}", EXIT_USAGE)


COMMAND = Command("incidents", run, FLAGS, across)
