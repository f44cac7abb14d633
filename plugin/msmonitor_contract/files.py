"""Files every part writes or opens the same way (standard library, Python 3.8): an output file written
to a temporary name beside it and renamed over it when complete."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path to write *path*'s content to; it becomes *path* (with the umask's permissions)
    only when the block completes, so a reader sees the old file or the whole new one."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        umask = os.umask(0)
        os.umask(umask)
        temp.chmod(0o666 & ~umask)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
