"""Output paths that arrive over the network, checked against the daemon's ``--trace-root`` list.

A remote ``dyno`` must not make a job write wherever the job's user can (msMonitor's scan finding:
network-supplied config flows into the log path). Paths are resolved on the daemon's view of the
filesystem, symlinks included, so ``root/link-to-etc`` and ``root/../etc`` are both outside.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence


def check_output_path(path: str, roots: Sequence[str], field: str = "log_file") -> Optional[str]:
    """None when *path* may be written; else the reason, for an ``INVALID_ARGUMENT`` naming *field*.

    Without roots every path is allowed (the default, as msMonitor).
    """
    if not roots:
        return None
    allowed = ", ".join(roots)
    if not os.path.isabs(path):
        return f"{field} {path!r}: must be an absolute path under a --trace-root of this daemon ({allowed})"
    real = os.path.realpath(path)
    for root in roots:
        real_root = os.path.realpath(root)
        if os.path.commonpath([real, real_root]) == real_root:
            return None
    return f"{field} {path!r}: outside the --trace-root directories of this daemon ({allowed})"
