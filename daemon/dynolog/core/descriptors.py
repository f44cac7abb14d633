"""How the daemon shares its open files limit (raised to the hard limit at start) among what a client
or a process can make it hold: :data:`RESERVED` descriptors for its own (IPC sockets, sinks, the log,
trace files, gRPC's listener, threads and streams), and the rest half to the port's connections, half
to the pidfds that watch registered processes. Neither a flood of connections nor thousands of
registering processes can then take what the other, or the daemon itself, needs."""

from __future__ import annotations

import resource
import sys

RESERVED = 512


def share() -> int:
    """The descriptors each of the port and the pidfds may hold (unbounded where the limit is)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return sys.maxsize
    return max(0, (soft - RESERVED) // 2)
