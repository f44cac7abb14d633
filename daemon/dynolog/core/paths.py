"""Where the daemon writes: its own folders (log, metrics), made and checked at start, and output paths
that arrive over the network, checked against the daemon's ``--trace-root`` list.

A remote ``dyno`` must not make a job write wherever the job's user can (msMonitor's scan finding:
network-supplied config flows into the log path). Paths are resolved on the daemon's view of the
filesystem, symlinks included, so ``root/link-to-etc`` and ``root/../etc`` are both outside.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Optional, Sequence


def writable_folder(folder: Path) -> None:
    """Make *folder* (and its parents) and check the daemon may write there; raises OSError whose
    strerror says what is wrong, in words (not "File exists" for a file in the way)."""
    for part in (folder, *folder.parents):
        if part.exists() and not part.is_dir():
            raise OSError(errno.ENOTDIR, f"{part} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OSError(errno.EACCES, f"{folder} is not writable by this user")


def check_output_path(path: str, roots: Sequence[str], field: str = "log_file") -> Optional[str]:
    """None when *path* may be written; else the reason, for an ``INVALID_ARGUMENT`` naming *field*.

    Without roots every path is allowed (the default, as msMonitor).
    """
    if not roots:
        return None
    allowed = ", ".join(roots)
    if "\0" in path:  # no file has such a name, and os.path.realpath raises on it
        return f"{field} {path!r}: holds a NUL byte"
    if not os.path.isabs(path):
        return f"{field} {path!r}: must be an absolute path under a --trace-root of this daemon ({allowed})"
    real = os.path.realpath(path)
    for root in roots:
        real_root = os.path.realpath(root)
        if os.path.commonpath([real, real_root]) == real_root:
            return None
    return f"{field} {path!r}: outside the --trace-root directories of this daemon ({allowed})"
