"""Noticing every edit of one file: inotify (through ctypes) where the kernel has it, polling otherwise.

MindIE polls ``stat()`` every 100 ms and compares the modification time in whole seconds, so two edits
within one second can be missed. Here an edit is a completed write or a rename onto the name (what
editors and ``sed -i`` do), reported by inotify as it happens; the poll, kept as a safety net (and the
only way where inotify is missing, e.g. on some network filesystems), compares the modification time in
nanoseconds, the size and the inode.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import select
import struct
import threading
from typing import Callable, Optional, Tuple

log = logging.getLogger("msmonitor_plugin")

POLL_S = 0.05  # without inotify
SAFETY_POLL_S = 1.0  # with inotify: a missed event (another host's write on a shared mount) still counts
_IN_ATTRIB, _IN_CLOSE_WRITE = 0x4, 0x8
_IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x80, 0x100, 0x200
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name

Signature = Optional[Tuple[int, int, int]]


def signature(path: str) -> Signature:
    """(mtime in ns, size, inode), or None when the file is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class FileWatch:
    """Calls *on_change* (on its own thread) after each edit of *path*, its deletion included."""

    def __init__(self, path: str, on_change: Callable[[], None]) -> None:
        self.path = os.path.abspath(path)
        self._on_change = on_change
        self._stop = threading.Event()
        self._seen = signature(self.path)
        self._inotify = _Inotify.open(os.path.dirname(self.path))
        self.mode = "inotify" if self._inotify is not None else "poll"
        self._thread = threading.Thread(target=self._run, name="msmonitor-service-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._inotify is not None:
            self._inotify.wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        if self._inotify is not None:
            self._inotify.close()

    def _run(self) -> None:
        name = os.path.basename(self.path).encode()
        polled = False  # the last report came from the signature, before the edit's own event arrived
        while not self._stop.is_set():
            try:
                if self._inotify is not None:
                    edited = name in self._inotify.names(SAFETY_POLL_S)
                else:
                    self._stop.wait(POLL_S)
                    edited = False
                now = signature(self.path)
                changed = now != self._seen
                if edited and not changed and polled:
                    edited = polled = False  # the event of the edit the signature already reported
                if edited or changed:
                    polled = changed and not edited
                    self._seen = now
                    self._on_change()
            except Exception:  # the thread must outlive anything: the service never notices
                log.exception("watching %s failed", self.path)
                self._stop.wait(SAFETY_POLL_S)


class _Inotify:
    """An inotify descriptor watching one folder for completed writes, renames, creations, deletions."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc, self.fd = libc, fd
        self._wake_r, self._wake_w = os.pipe()

    @classmethod
    def open(cls, folder: str) -> Optional[_Inotify]:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd < 0:
                return None
            mask = _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE | _IN_ATTRIB
            if libc.inotify_add_watch(fd, os.fsencode(folder), mask) < 0:
                os.close(fd)
                return None
        except (OSError, AttributeError):  # no libc, or no inotify in it
            return None
        return cls(libc, fd)

    def names(self, timeout: float) -> set:
        """The names events came for within *timeout* seconds (empty: none, or woken to stop)."""
        readable, _, _ = select.select([self.fd, self._wake_r], [], [], timeout)
        if self.fd not in readable:
            return set()
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return set()
        names, offset = set(), 0
        while offset + _EVENT.size <= len(data):
            _, _, _, length = _EVENT.unpack_from(data, offset)
            offset += _EVENT.size
            names.add(data[offset : offset + length].rstrip(b"\0"))
            offset += length
        return names

    def wake(self) -> None:
        os.write(self._wake_w, b"x")

    def close(self) -> None:
        for fd in (self.fd, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
