"""Files every part writes or opens the same way (standard library, Python 3.8): an output file written
to a temporary name beside it and renamed over it when complete, and a SQLite store checked whole when
opened, a damaged one moved aside for a new one."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence


@contextlib.contextmanager
def replacing(
    path: Path, mode: Optional[int] = None, exclusive: bool = False, sync: bool = False
) -> Iterator[Path]:
    """A temporary path to write *path*'s content to; it becomes *path* only when the block completes, so
    a reader sees the old file or the whole new one.

    The file gets *mode*, or by default the umask's permissions (as a file ``touch`` creates). With
    *exclusive*, a *path* that exists by then is never replaced: FileExistsError, the old file kept. With
    *sync*, the content is on disk before it becomes *path*, so that a crash leaves the old file or the
    new one whole. Until then the file is 0600 (``mkstemp``'s): a private one is never readable by others
    on its way.
    """
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        temp.chmod(_umasked(0o666) if mode is None else mode)
        if sync:
            _sync(temp)
        if exclusive:
            os.link(temp, path)  # fails if it exists: never overwrite
        else:
            os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _umasked(mode: int) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_sqlite(
    path: str, schema: Sequence[str], log: logging.Logger, what: str, shared: bool = False
) -> sqlite3.Connection:
    """The SQLite store at *path* (made with *schema* if new), in WAL mode so that a reader never blocks
    its writer; *shared*: used from several threads (under the caller's lock).

    It is checked whole (``PRAGMA quick_check``): SQLite reads a file lazily, and a damaged page would
    otherwise fail a write much later, in the middle of the work. A file that is not a readable store
    (random bytes, a folder at the path, a damaged page) is moved aside with its ``-wal`` and ``-shm``,
    *what* and both names in *log*'s warning, and a new one started: a store is a record, and losing it
    must not stop what keeps it."""
    try:
        return _checked(path, schema, shared)
    except (sqlite3.DatabaseError, OSError) as exc:
        aside = _move_aside(path)
        log.warning("%s %s unreadable (%s): moved to %s, starting a new one", what, path, exc, aside)
        return _checked(path, schema, shared)


def _checked(path: str, schema: Sequence[str], shared: bool) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=not shared)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        for statement in schema:
            db.execute(statement)
        db.commit()
        (verdict,) = db.execute("PRAGMA quick_check").fetchone()
        if verdict != "ok":
            raise sqlite3.DatabaseError(verdict)
    except BaseException:
        db.close()
        raise
    return db


def _move_aside(path: str) -> str:
    """*path* renamed for a post-mortem, with the WAL's files, which belong to the database they came with."""
    aside = f"{path}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
    for suffix in ("", "-wal", "-shm"):
        if os.path.lexists(path + suffix):
            os.replace(path + suffix, aside + suffix)
    return aside
