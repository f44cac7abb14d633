"""Files every part writes or opens the same way (standard library, Python 3.8): an output file written
to a temporary name beside it and renamed over it when complete."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator, Optional


@contextlib.contextmanager
def replacing(path: Path, mode: Optional[int] = None, exclusive: bool = False) -> Iterator[Path]:
    """A temporary path to write *path*'s content to; it becomes *path* only when the block completes, so
    a reader sees the old file or the whole new one.

    The file gets *mode*, or by default the umask's permissions (as a file ``touch`` creates). With
    *exclusive*, a *path* that exists by then is never replaced: FileExistsError, the old file kept.
    """
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        temp.chmod(_umasked(0o666) if mode is None else mode)
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
