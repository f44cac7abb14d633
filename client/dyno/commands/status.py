"""``dyno status``: is the daemon up, what does it serve, how many processes are registered."""

from __future__ import annotations

from argparse import Namespace
from typing import Any, Dict, List, Optional, Union

from .. import waiting
from ..flags import Command, Flag
from ..fleet.target import Target
from ..model.daemon import GetStatusResponse, IpcCounters, LegacyStatus, MsMonitorStatus
from ..output import as_dict, duration, print_json

Status = Union[GetStatusResponse, LegacyStatus]


def run(target: Target, args: Namespace) -> None:
    """Daemon health and counts: version, uptime, IPC endpoints, registered processes."""
    status = waiting.until(lambda: ask(target), lambda _: None) if args.wait else ask(target)
    if target.json:
        print_json(to_json(status))
    elif isinstance(status, LegacyStatus):
        _print_legacy(target, status)
    else:
        _print(target, status)


def across(target: Target, args: Namespace) -> None:
    from ..fleet import fanout

    columns = ("VERSION", "UP", "TLS", "PROCESSES", "NPUTRACE", "NPUMONITOR", "STEP")
    fanout.run(target, ask, fanout.View(columns, lambda status: [_row(status)], to_json))


def ask(target: Target) -> Status:
    """The daemon's status; a C++ daemon's (dyno.edge.legacy) when that is what the host runs."""
    from ..edge.rpc import Daemon

    return Daemon(target, "dyno status").status()


def to_json(status: Status) -> Dict[str, Any]:
    if isinstance(status, LegacyStatus):  # getStatus's own keys, as msMonitor's scripts read them
        return {"legacy": status.flavor, "version": status.version, "tls": status.tls, **status.reply}
    data = as_dict(status)
    data.update(msmonitor_fields(status.msmonitor))  # the keys msMonitor's getStatus had, for its scripts
    return data


def _row(status: Status) -> List[str]:
    if isinstance(status, LegacyStatus):  # what getStatus tells: msMonitor's states, or nothing
        get = status.get
        tls = "mTLS" if status.tls else "plain"
        return [
            f"{status.version} ({status.flavor})",
            "-",
            tls,
            "-",
            get("nputrace"),
            get("npumonitor"),
            get("current_step"),
        ]
    m = status.msmonitor or MsMonitorStatus()
    return [
        status.version,
        duration(status.uptime_s),
        "mTLS" if status.tls else "plain",
        str(status.processes),
        m.nputrace,
        m.npumonitor,
        str(m.current_step),
    ]


def _print(target: Target, status: GetStatusResponse) -> None:
    ipc = (
        ", ".join(status.ipc_addresses)
        if status.ipc_enabled
        else "off (start dynolog with --enable-ipc-monitor)"
    )
    c = status.ipc or IpcCounters()
    print(f"dynolog {status.version} on {status.hostname} (pid {status.pid}), up {duration(status.uptime_s)}")
    print(f"  transport:  {'mutual TLS' if status.tls else 'plaintext'} at {target.address}")
    print(f"  ipc:        {ipc}")
    print(
        f"  processes:  {status.processes} registered "
        f"({status.plugin_processes} plugin, {status.kineto_processes} kineto)"
    )
    print(
        f"  datagrams:  {c.received} received, {c.handled} handled, {c.malformed} malformed, "
        f"{c.rejected_senders} from rejected senders; {c.replied} replied, {c.send_errors} replies lost"
    )
    m = status.msmonitor or MsMonitorStatus()
    steps = f", steps {m.start_step}-{m.stop_step}" if m.start_step >= 0 else ""
    print(f"  nputrace:   {m.nputrace}{steps}; npumonitor: {m.npumonitor}; current step {m.current_step}")
    dropped = ", ".join(f"{n} at {where}" for where, n in sorted(status.dropped.items()) if n) or "nothing"
    print(f"  dropped:    {dropped}")


def _print_legacy(target: Target, status: LegacyStatus) -> None:
    from dynoproto import legacy as wire

    transport = "mutual TLS" if status.tls else "plaintext"
    print(f"{status.flavor}'s C++ daemon {status.version} at {target.address} (legacy JSON RPC, {transport})")
    if "nputrace" in status.reply:
        steps = (
            f", steps {status.get('start_step')}-{status.get('stop_step')}"
            if "start_step" in status.reply
            else ""
        )
        print(
            f"  nputrace:   {status.get('nputrace')}{steps}; npumonitor: {status.get('npumonitor')}; "
            f"current step {status.get('current_step')}"
        )
    print(f"  getStatus:  {wire.reply(status.reply).decode()}")


def msmonitor_fields(m: Optional[MsMonitorStatus]) -> Dict[str, Any]:
    """msMonitor's getStatus shape: start_step and stop_step only while a trace is Running or Ready."""
    m = m or MsMonitorStatus()
    fields: Dict[str, Any] = {
        "nputrace": m.nputrace,
        "npumonitor": m.npumonitor,
        "current_step": m.current_step,
    }
    if m.nputrace in ("Running", "Ready"):
        fields.update(start_step=m.start_step, stop_step=m.stop_step)
    return fields


FLAGS = (
    Flag(
        "--wait",
        None,
        bool,
        False,
        f"wait (up to {waiting.BOUND_S:.0f} s) for a daemon that is still starting: for a script "
        "that has just started it",
    ),
)
COMMAND = Command("status", run, FLAGS, across)
