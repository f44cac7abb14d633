"""Learn the moment a registered process exits, whatever ended it: a pidfd per process on the loop.

A clean exit says goodbye, but SIGTERM (Python's default handler runs no ``atexit``) and SIGKILL say
nothing; without this the process would stay listed until the next sweep noticed its ``/proc`` entry
was gone. Where ``pidfd_open`` is missing (Linux < 5.3, Python < 3.9) or refused (the pid is not in
the daemon's pid namespace), the sweep stays the only way.

A pidfd is a descriptor, and every registered process would hold one: thousands of processes under a
low open files limit left none for the gRPC port (it could not accept a connection). So pidfds take
their share of the limit alone (:mod:`dynolog.core.descriptors`); past it a process is still
registered, and the sweep notices its exit.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Callable, Dict

from ..core import descriptors
from ..core.logs import Once

log = logging.getLogger("dynolog.ipc.endpoint")


class PidWatch:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, exited: Callable[[int], None], limit: int = sys.maxsize
    ) -> None:
        self._loop = loop
        self._exited = exited  # told the host pid of each watched process that exits
        self._fds: Dict[int, int] = {}  # host pid -> its pidfd
        self.limit = limit  # pidfds open at once, at most (descriptors.share())
        self._told = Once()

    def watch(self, host_pid: int) -> bool:
        """Watch *host_pid* (once, however often asked); False where the kernel offers no pidfd, or
        another would eat into the descriptors kept for the port."""
        if host_pid in self._fds:
            return True
        if len(self._fds) >= self.limit:
            if self._told("full"):
                log.warning(
                    "process %d is watched by the sweep, not a pidfd: %d pidfds are open, their share "
                    "of the open files limit (half of it past %d kept for the daemon's own files; the "
                    "other half is the port's; raise the limit: LimitNOFILE=, ulimit -n)",
                    host_pid, len(self._fds), descriptors.RESERVED,
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
