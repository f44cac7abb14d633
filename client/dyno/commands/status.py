"""``dyno status``: is the daemon up, what does it serve, how many processes are registered."""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any, Dict

from ..cli import Command
from ..output import as_dict, duration, print_json
from ..target import Target

if TYPE_CHECKING:
    from dynoproto import dynolog_pb2 as pb


def run(target: Target, args: Namespace) -> None:
    """Daemon health and counts: version, uptime, IPC endpoints, registered processes."""
    from dynoproto import dynolog_pb2 as pb

    from ..connection import connect

    with connect(target) as stub:
        status = stub.GetStatus(pb.GetStatusRequest(), timeout=target.timeout)
    if target.json:
        data = as_dict(status)
        data.update(msmonitor_fields(status.msmonitor))  # the keys msMonitor's getStatus had, for its scripts
        print_json(data)
    else:
        _print(target, status)


def _print(target: Target, status: pb.GetStatusResponse) -> None:
    ipc = (
        ", ".join(status.ipc_addresses)
        if status.ipc_enabled
        else "off (start dynolog with --enable-ipc-monitor)"
    )
    c = status.ipc
    print(f"dynolog {status.version} on {status.hostname} (pid {status.pid}), up {duration(status.uptime_s)}")
    print(f"  transport:  {'mutual TLS' if status.tls else 'plaintext'} at {target.address}")
    print(f"  ipc:        {ipc}")
    print(
        f"  processes:  {status.processes} registered "
        f"({status.plugin_processes} plugin, {status.kineto_processes} kineto)"
    )
    print(
        f"  datagrams:  {c.received} received, {c.replied} replied, {c.malformed} malformed, "
        f"{c.rejected_senders} from rejected senders"
    )
    m = status.msmonitor
    steps = f", steps {m.start_step}-{m.stop_step}" if m.start_step >= 0 else ""
    print(f"  nputrace:   {m.nputrace}{steps}; npumonitor: {m.npumonitor}; current step {m.current_step}")
    dropped = ", ".join(f"{n} at {where}" for where, n in sorted(status.dropped.items()) if n) or "nothing"
    print(f"  dropped:    {dropped}")


def msmonitor_fields(m: pb.MsMonitorStatus) -> Dict[str, Any]:
    """msMonitor's getStatus shape: start_step and stop_step only while a trace is Running or Ready."""
    fields: Dict[str, Any] = {
        "nputrace": m.nputrace,
        "npumonitor": m.npumonitor,
        "current_step": m.current_step,
    }
    if m.nputrace in ("Running", "Ready"):
        fields.update(start_step=m.start_step, stop_step=m.stop_step)
    return fields


COMMAND = Command("status", run)
