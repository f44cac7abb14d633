"""Telling whether a file changed without reading it: the daemon follows its certificate files this way.

A file counts as changed when its inode, size or modification time differs. Files replaced by a rename
(as ``dyno certs`` writes them) always get a new inode; a file rewritten in place within the same clock
tick and at the same size is not seen, which is why the documentation asks for renames.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional, Tuple, Union

Stamp = Optional[Tuple[int, int, int]]  # None: the file is missing
PathLike = Union[str, "os.PathLike[str]"]


def file_stamp(path: PathLike) -> Stamp:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def file_stamps(paths: Iterable[PathLike]) -> Tuple[Stamp, ...]:
    return tuple(file_stamp(p) for p in paths)
