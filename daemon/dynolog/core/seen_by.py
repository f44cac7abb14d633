"""A folder as a registered process sees it: through its root in ``/proc`` (a container's mounts are its
own) and with its credentials, so a trace it could not write is refused before the answer says
effective, not found failed once the trace was due.

Where the daemon may not look (another user's process without root, no ``/proc``), or an ACL decides
who may write the folder, nothing is said: the process's own report fails the trace as before. A
false refusal would be worse than the late failure.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional

from msmonitor_contract.numbers import strict_int

_ACL = "system.posix_acl_access"
_CAP_DAC_OVERRIDE = 1


@dataclass(frozen=True)
class Credentials:
    uid: int  # the filesystem uid, which access checks use
    gids: FrozenSet[int]  # the filesystem gid and the supplementary groups
    overrides: bool  # CAP_DAC_OVERRIDE: mode bits stop it not (root, or a capability granted)


def missing(host_pid: int, folder: str) -> bool:
    """Whether *folder* does not exist as process *host_pid* sees it."""
    base = _base(host_pid, folder)
    if base is None:
        return False
    try:
        os.stat(base + folder)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def unwritable(host_pid: int, folder: str) -> Optional[str]:
    """Why process *host_pid* could not write into *folder*, made first where missing (as the plugin
    makes it): its nearest existing part is a file, on a read-only file system, or not writable by the
    process's uid and groups. None when it could, or where the daemon cannot tell."""
    base = _base(host_pid, folder)
    credentials = _credentials(host_pid)
    if base is None or credentials is None:
        return None
    top = "/" if folder.startswith("/") else "."  # relative: to the process's working folder
    existing = folder
    while existing != top and not os.path.lexists(base + existing):
        existing = os.path.dirname(existing.rstrip("/")) or top
    if _through_a_link(base, existing):
        return None  # an absolute link here would resolve against the daemon's root, not the process's
    try:
        return _refusal(base + existing, existing, credentials)
    except OSError:
        return None


def _through_a_link(base: str, path: str) -> bool:
    lead = "/" if path.startswith("/") else ""
    parts = [p for p in path.split("/") if p]
    return any(os.path.islink(base + lead + "/".join(parts[: i + 1])) for i in range(len(parts)))


def _refusal(seen: str, existing: str, credentials: Credentials) -> Optional[str]:
    info = os.stat(seen)
    if not stat.S_ISDIR(info.st_mode):
        return f"{existing} is not a folder there"
    if os.statvfs(seen).f_flag & os.ST_RDONLY:
        return f"{existing} is on a read-only file system there"
    if credentials.overrides or _ACL in os.listxattr(seen):
        return None
    if info.st_uid == credentials.uid:
        needed = stat.S_IWUSR | stat.S_IXUSR
    elif info.st_gid in credentials.gids:
        needed = stat.S_IWGRP | stat.S_IXGRP
    else:
        needed = stat.S_IWOTH | stat.S_IXOTH
    if info.st_mode & needed == needed:
        return None
    return (
        f"{existing} is not writable by uid {credentials.uid} there "
        f"(mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}, group {info.st_gid})"
    )


def _base(host_pid: int, folder: str) -> Optional[str]:
    """The prefix that shows *folder* as the process sees it; None where the daemon may not look."""
    base = f"/proc/{host_pid}/{'root' if folder.startswith('/') else 'cwd/'}"
    try:
        os.stat(base)
    except OSError:
        return None
    return base


def _credentials(host_pid: int) -> Optional[Credentials]:
    """From ``/proc/<pid>/status``: ``Uid:``/``Gid:`` list real, effective, saved and filesystem ids."""
    fields: Dict[str, List[int]] = {}
    try:
        with open(f"/proc/{host_pid}/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("Uid", "Gid", "Groups"):
                    numbers = [strict_int(v) for v in value.split()]
                    fields[key] = [n for n in numbers if n is not None]
                elif key == "CapEff":
                    fields[key] = [int(value.strip() or "0", 16)]
    except (OSError, ValueError):
        return None
    uids, gids = fields.get("Uid", []), fields.get("Gid", [])
    if len(uids) < 4 or len(gids) < 4:
        return None
    overrides = bool(fields.get("CapEff", [0])[0] & 1 << _CAP_DAC_OVERRIDE)
    return Credentials(uids[3], frozenset([gids[3], *fields.get("Groups", [])]), overrides)
