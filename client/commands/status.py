"""``dyno status``: is the daemon up, what does it serve, how many processes are registered."""

from __future__ import annotations

import typer
from dynoproto import dynolog_pb2 as pb

from ..connection import Target, connect
from ..output import as_dict, duration, print_json


def run(ctx: typer.Context) -> None:
    """Daemon health and counts: version, uptime, IPC endpoints, registered processes."""
    target: Target = ctx.obj
    with connect(target) as stub:
        status = stub.GetStatus(pb.GetStatusRequest(), timeout=target.timeout)
    if target.json:
        print_json(as_dict(status))
        return
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
