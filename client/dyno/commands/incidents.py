"""``dyno incidents``: what npu-monitor's ``--auto-trace`` detected, where, the evidence, the trace taken;
or, with ``--from DIR`` (``$DYNO_INCIDENTS``), what ``dyno respond`` did for each alert: one incident per
alert, every rank's trace of the same steps, collected into DIR."""

from __future__ import annotations

import os
import time
from argparse import Namespace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from msmonitor_contract.numbers import strict_int

from ..declared import JOB_ID
from ..exits import EXIT_USAGE, CliError
from ..flags import Command, Flag, directory
from ..fleet.target import Target
from ..model.monitoring import IncidentInfo
from ..output import as_dict, duration, print_json, rank_text, table
from ..respond import ENV

if TYPE_CHECKING:
    from ..respond.store import Incident

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
    JOB_ID._replace(field=None, aliases=("--job",)),
    Flag("--limit", None, int, 0, "only the most recent this many (0: all the daemon keeps)", minimum=0),
    Flag(
        "--from",
        None,
        directory,
        None,
        f"the incidents `dyno respond --collect DIR` recorded, not a daemon's (default: ${ENV}, unless "
        "--hostname names a daemon)",
    ),
)
HEADERS = ("ID", "AGE", "JOB", "RANK", "PID", "DETECTION", "KIND", "NAME", "SLOWER", "ACTION")
JOB_HEADERS = (
    "ID",
    "AGE",
    "JOB",
    "ALERT",
    "RANK",
    "HOSTS",
    "STEPS",
    "SLOWEST",
    "REPEATS",
    "RESOLVED",
    "ACTION",
)


def run(target: Target, args: Namespace) -> None:
    """Incidents npu-monitor's --auto-trace raised on this node, oldest first; 'show ID' for one.

    Example: dyno incidents
             dyno incidents show 17
    On many hosts: dyno --hosts 'node[001-016]' incidents
    What dyno respond recorded (one incident per alert, every rank traced):
             dyno incidents --from /data/incidents --job 77
    """
    folder = _folder(target, args)
    if folder is not None:
        return _responded(target, args, folder)
    incident_id = _shown(args)
    if incident_id is not None:
        info = get(target, incident_id)
        print_json(as_dict(info)) if target.json else print(show_text(info))
        return
    incidents = ask(target, args)
    if target.json:
        print_json(to_json(incidents))
    elif not incidents:
        print("No incidents. Detection runs where monitoring started with --auto-trace (dyno npu-monitor).")
    else:
        print(table(HEADERS, rows(incidents)))


def across(target: Target, args: Namespace) -> None:
    from ..fleet import fanout

    if getattr(args, "from"):
        raise CliError(
            "--from reads dyno respond's incidents here: --hosts, --hostfile and --slurm-job do not apply",
            EXIT_USAGE,
        )
    incident_id = _shown(args)
    if incident_id is not None:  # each daemon numbers its own: the hosts without this one say so
        view = fanout.View(HEADERS, lambda info: [_row(info)], as_dict)
        return fanout.run(target, lambda one: get(one, incident_id), view)
    fanout.run(target, lambda one: ask(one, args), fanout.View(HEADERS, rows, to_json))


def ask(target: Target, args: Namespace) -> Tuple[IncidentInfo, ...]:
    from ..edge.rpc import Daemon

    return Daemon(target, "dyno incidents").list_incidents(args.job_id, args.limit)


def get(target: Target, incident_id: int) -> IncidentInfo:
    from ..edge.rpc import Daemon

    return Daemon(target, "dyno incidents").get_incident(incident_id)


def to_json(incidents: Sequence[IncidentInfo]) -> List[Dict[str, Any]]:
    return [as_dict(i) for i in incidents]


def rows(incidents: Sequence[IncidentInfo]) -> List[List[str]]:
    return [_row(i) for i in incidents]


def show_text(i: IncidentInfo) -> str:
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


def _row(i: IncidentInfo) -> List[str]:
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


def _ratio(i: IncidentInfo) -> str:
    return _times(i.current_ns, i.baseline_ns)


def _times(current: float, baseline: float) -> str:
    return f"{current / baseline:.2f}x" if baseline > 0 else "-"


def _shown(args: Namespace) -> Optional[int]:
    """The ID of ``show ID``; None for the list."""
    shown = _shown_text(args)
    if shown is None:
        return None
    number = strict_int(shown)
    if number is not None:
        return number
    raise CliError(f"a daemon's incident IDs are numbers, got {shown!r}", EXIT_USAGE)


def _shown_text(args: Namespace) -> Optional[str]:
    words = args.what or []
    if not words:
        return None
    if len(words) == 2 and words[0] == "show":
        return str(words[1])
    raise CliError(f"expected nothing or 'show ID', got {' '.join(words)!r}", EXIT_USAGE)


# --- dyno respond's incidents (--from DIR) ------------------------------------------------------------


def _folder(target: Target, args: Namespace) -> Optional[str]:
    """The responder's folder to read: --from, else $DYNO_INCIDENTS unless a daemon is named (--hostname);
    None: ask the daemon."""
    given = getattr(args, "from") or (os.environ.get(ENV) if target.hostname == "localhost" else None)
    return os.path.abspath(given) if given else None


def _responded(target: Target, args: Namespace, folder: str) -> None:
    from ..respond.store import DB_NAME, JobIncidentStore

    if not os.path.isfile(os.path.join(folder, DB_NAME)):
        raise CliError(f"{folder}: no {DB_NAME} there: not a folder dyno respond --collect wrote", EXIT_USAGE)
    store = JobIncidentStore(folder, reader=True)
    try:
        shown = _shown_text(args)
        if shown is not None:
            incident = store.get(shown)
            if incident is None:
                raise CliError(f"no incident {shown} in {folder}")
            print_json(incident.to_json()) if target.json else print(_job_text(incident, folder))
            return
        listed = store.list(args.job_id, args.limit)
    finally:
        store.close()
    if target.json:
        print_json([i.to_json() for i in listed])
    elif not listed:
        print(f"No incidents in {folder}" + (f" for job {args.job_id}." if args.job_id else "."))
    else:
        print(table(JOB_HEADERS, [_job_row(i) for i in listed]))


def _job_row(i: Incident) -> List[str]:
    steps = f"{i.steps['start']}-{i.steps['stop'] - 1}" if i.steps else "-"
    slowest = (i.analysis or {}).get("slowest_rank")
    return [
        i.id,
        duration(time.time() - i.at),
        str(i.job_id),
        i.alert.get("name", ""),
        "-" if i.suspect.get("rank") is None else str(i.suspect["rank"]),
        str(len(i.hosts)),
        steps,
        "-" if slowest is None else str(slowest),
        str(i.repeats),
        "-" if i.resolved_at is None else duration(time.time() - i.resolved_at) + " ago",
        i.action,
    ]


def _job_text(i: Incident, folder: str) -> str:
    """One responder's incident: the alert, the hosts, each rank's trace, the analysis, the timeline."""
    lines = [
        f"incident {i.id}, {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(i.at))}",
        f"  alert {i.alert.get('name', '')} ({i.alert.get('fingerprint', '')}), job {i.job_id}, "
        f"rank {i.suspect.get('rank')} on {i.suspect.get('host') or '?'}; repeats {i.repeats}",
        f"  action: {i.action}",
        f"  hosts ({i.hosts_from}): {', '.join(i.hosts) or '-'}",
    ]
    if i.steps:
        lines.append(
            f"  steps {i.steps['start']}-{i.steps['stop'] - 1}, in {os.path.join(folder, i.id, i.trace_dir)}"
        )
    if i.ranks:
        rows = [
            [str(r["rank"]), r["host"], str(r["pid"]), r["state"], ", ".join(r["files"]) or r["error"]]
            for r in i.ranks
        ]
        lines += ["", table(("RANK", "HOST", "PID", "PHASE", "FILES / ERROR"), rows)]
    if i.analysis:
        lines += ["", f"analysis ({i.analysis['method']}): slowest rank {i.analysis.get('slowest_rank')}"]
        if i.analysis.get("note"):
            lines.append(f"  {i.analysis['note']}")
        figures = [
            [str(f["rank"]), f"{f['step_ms']:.1f}", f"{f['compute_ms']:.1f}", f"{f['collective_ms']:.1f}"]
            for f in i.analysis.get("per_rank", [])
        ]
        if figures:
            lines.append(table(("RANK", "STEP ms", "COMPUTE ms", "COLLECTIVES ms"), figures))
    lines += ["", "timeline:"]
    lines += [f"  {time.strftime('%H:%M:%S', time.localtime(at))}  {what}" for at, what in i.timeline]
    return "\n".join(lines)


COMMAND = Command("incidents", run, FLAGS, across)
