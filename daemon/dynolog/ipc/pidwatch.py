"""Learn the moment a registered process exits, whatever ended it: a pidfd per process on the loop.

A clean exit says goodbye, but SIGTERM (Python's default handler runs no ``atexit``) and SIGKILL say
nothing; without this the process would stay listed until the next sweep noticed its ``/proc`` entry
was gone. Where ``pidfd_open`` is missing (Linux < 5.3, Python < 3.9) or refused (the pid is not in
the daemon's pid namespace), the sweep stays the only way.

A pidfd is a descriptor, and every registered process would hold one: thousands of processes under a
low open files limit left none for the gRPC port (it could not accept a connection). So pidfds are
opened only while they leave :data:`RESERVE` descriptors free (:func:`budget`); past that a process is
still registered, and the sweep notices its exit.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import sys
from typing import Callable, Dict

from ..core.logs import Once

log = logging.getLogger("dynolog.ipc.endpoint")

# Descriptors the pidfds leave to the rest of the daemon: the port's connections while they are told
# apart (an address may keep 256 waiting) and relayed (three each: the client's, the relay's to gRPC,
# gRPC's own), gRPC's streams, the IPC sockets, the sinks and the trace files.
RESERVE = 512
_FALLBACK_OPEN = 64  # descriptors assumed open where /proc/self/fd cannot be listed


def budget(reserve: int = RESERVE) -> int:
    """How many pidfds may be open: the open files limit (the daemon raised it to the hard limit at
    start) less the descriptors open now and *reserve*; 0 where that leaves none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return sys.maxsize
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = _FALLBACK_OPEN
    return max(0, soft - open_now - reserve)


class PidWatch:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, exited: Callable[[int], None], limit: int = sys.maxsize
    ) -> None:
        self._loop = loop
        self._exited = exited  # told the host pid of each watched process that exits
        self._fds: Dict[int, int] = {}  # host pid -> its pidfd
        self.limit = limit  # pidfds open at once, at most (:func:`budget`)
        self._told = Once()

    def watch(self, host_pid: int) -> bool:
        """Watch *host_pid* (once, however often asked); False where the kernel offers no pidfd, or
        another would eat into the descriptors kept for the port."""
        if host_pid in self._fds:
            return True
        if len(self._fds) >= self.limit:
            if self._told("full"):
                log.warning(
                    "process %d is watched by the sweep, not a pidfd: %d pidfds are open, the most the "
                    "open files limit allows while keeping %d descriptors for the gRPC port and the rest "
                    "(raise the limit: LimitNOFILE=, ulimit -n)",
                    host_pid, len(self._fds), RESERVE,
                )  # fmt: skip
            return False
        try:
            fd = os.pidfd_open(host_pid)
        except (AttributeError, OSError) as exc:  # no pidfd_open, or it exited already (the sweep sees)
            log.debug("no pidfd for process %d (%s): the sweep notices its exit", host_pid, exc)
            return False
        self._fds[host_pid] = fd
        self._loop.add_reader(fd, self._readable, host_pid)
        return True

    def __len__(self) -> int:
        return len(self._fds)

    def _readable(self, host_pid: int) -> None:
        """A pidfd polls readable once its process has exited (zombie or reaped)."""
        self._drop(host_pid)
        self._exited(host_pid)

    def _drop(self, host_pid: int) -> None:
        fd = self._fds.pop(host_pid)
        self._loop.remove_reader(fd)
        os.close(fd)

    def close(self) -> None:
        for host_pid in list(self._fds):
            self._drop(host_pid)
