"""Where a trace writes: its folder, opened once when the trace is accepted, and written through.

The daemon checks an output path against its ``--trace-root`` when the command arrives; the process
writes later, maybe hours later. A folder swapped for a symbolic link in between would send the trace
outside the root, so the check is made again here, by the process that writes, and kept:

- under the roots the daemon gives in its hello reply, the folder is opened from its root one component
  at a time, never following a symbolic link (``O_NOFOLLOW``), each missing one made here; a link
  anywhere below the root is refused;
- the open folder is what is written into: torch.profiler, which writes by path, is handed
  ``/proc/self/fd/N/...``, which the kernel resolves to the open folder itself, not by its name;
- torch_npu's profiler resolves its path itself, so it gets the folder's name, checked to lead to the
  open folder before it starts and again after it wrote (:meth:`OutputFolder.check_unmoved`).

What the plugin writes is left readable by its owner and group only: files 0640, folders 0750 (or less,
as the umask says); the group is the one the file system gives (a setgid folder's).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from typing import List, Sequence, Tuple

FOLDER_MODE = 0o750
FILE_MODE = 0o640
# O_PATH: a folder the job may pass through but not list (mode 0711) opens too, as a write by path would.
_FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
# Opened only to change its mode: never a link, never waiting on a FIFO planted there.
_NO_FOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_PROC_FD = "/proc/self/fd"


class OutputFolder:
    """A folder held open. *route* is how it was reached: a start folder and the components below it,
    each opened without following links when *confined*."""

    def __init__(self, path: str, fd: int, route: Tuple[str, List[str]], confined: bool) -> None:
        self.path = path  # as named: what the daemon and the user read
        self.fd = fd
        self._route = route
        self._confined = confined
        st = os.fstat(fd)
        self._identity = (st.st_dev, st.st_ino)

    def reach(self, name: str = "") -> str:
        """A path to *name* in this folder that leads to the open folder whatever its name leads to now
        (its name where /proc is not mounted: then :meth:`check_unmoved` is what holds)."""
        base = f"{_PROC_FD}/{self.fd}" if os.path.isdir(_PROC_FD) else self.path
        return os.path.join(base, name) if name else base

    def sub(self, relative: str) -> Tuple[OutputFolder, bool]:
        """The folder *relative* below this one, made (0750) if missing, opened as this one was; and
        whether it was made here."""
        parts = _parts(relative)
        fd, made = _walk(os.dup(self.fd), parts, self._confined, make=True)
        start, below = self._route
        path = os.path.join(self.path, *parts)
        return OutputFolder(path, fd, (start, below + parts), self._confined), made

    def check_unmoved(self) -> None:
        """Raise OSError when the folder's name no longer leads to the folder opened (a component
        swapped for a link, or moved): a profiler that wrote by that name may have written elsewhere."""
        if not self._confined:
            return  # no roots: any folder, links included, was allowed
        start, below = self._route
        try:
            fd, _ = _walk(os.open(start, _FOLDER), below, True, make=False)
        except OSError as exc:
            raise _moved(self.path, exc.strerror or str(exc)) from None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if (st.st_dev, st.st_ino) != self._identity:
            raise _moved(self.path, "it is another folder now")

    def write_text(self, name: str, text: str) -> str:
        """A file of the plugin's own (info.json), written through the open folder; its path as named."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE, dir_fd=self.fd)
        with open(fd, "w") as f:
            f.write(text)
        return os.path.join(self.path, name)

    def seal(self, name: str) -> None:
        """Take group write and every right of others from the file *name* here, or from the folder
        *name* and everything below it; links are not followed (nor changed). Never raises: a mode
        that could not be changed does not fail the trace."""
        try:
            fd = os.open(name, _NO_FOLLOW, dir_fd=self.fd)
        except OSError:  # a link, or gone
            return
        try:
            if _tighten(fd):
                for _, _, files, dir_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                    _tighten(dir_fd)
                    for file in files:
                        _tighten_at(file, dir_fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def close(self) -> None:
        os.close(self.fd)

    def probe(self) -> None:
        """Create and remove a file here: permission bits, ACLs, read-only mounts and root-squashed
        network file systems each answer only to a real write. Raises OSError."""
        name = f".msmonitor-probe-{secrets.token_hex(8)}"
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=self.fd))
        os.unlink(name, dir_fd=self.fd)


def open_output(path: str, roots: Sequence[str]) -> OutputFolder:
    """Open (and make) the folder *path*; under *roots*, from the root it is named under, following no
    link below it. Raises OSError saying why in words (outside the roots, a link, not a folder, ...)."""
    if roots:
        start, below = _under(path, roots)
    else:  # anywhere, links followed: as the daemon allowed
        start, below = "/" if os.path.isabs(path) else ".", _parts(path, dots=True)
    fd, _ = _walk(os.open(start, _FOLDER), below, bool(roots), make=True)
    return OutputFolder(path, fd, (start, below), confined=bool(roots))


def _under(path: str, roots: Sequence[str]) -> Tuple[str, List[str]]:
    """The root *path* is named under (as given, or as its links resolve) and the components below it."""
    parts = _parts(path)
    if os.path.isabs(path):
        for root in roots:
            for named in (root, os.path.realpath(root)):
                prefix = _parts(named)
                if parts[: len(prefix)] == prefix:
                    return named, parts[len(prefix) :]
    raise OSError(
        errno.EPERM,
        f"outside the --trace-root directories of the daemon ({', '.join(roots)}), named without links",
    )


def _parts(path: str, dots: bool = False) -> List[str]:
    """A path's components; ``..`` refused unless *dots* (outside any root, where links are followed
    anyway)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts and not dots:
        raise OSError(errno.EPERM, "'..' in a path under a --trace-root")
    return parts


def _walk(fd: int, parts: List[str], confined: bool, make: bool) -> Tuple[int, bool]:
    """From the open folder *fd* (taken), each of *parts* opened in turn (made when *make*); the last
    one's descriptor, and whether it was made here."""
    made = False
    flags = _FOLDER | (os.O_NOFOLLOW if confined else 0)
    try:
        for name in parts:
            made = False
            if make:
                try:
                    os.mkdir(name, FOLDER_MODE, dir_fd=fd)
                    made = True
                except FileExistsError:
                    pass
            try:
                child = os.open(name, flags, dir_fd=fd)
            except OSError as exc:
                raise _why_not(name, fd, exc) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, made


def _why_not(name: str, parent: int, exc: OSError) -> OSError:
    """A component that would not open: a link below a root says so (O_NOFOLLOW's own error does not)."""
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        is_link = False
    if is_link:
        return OSError(errno.ELOOP, f"{name!r} is a symbolic link below the --trace-root: refused")
    return exc


def _moved(path: str, why: str) -> OSError:
    return OSError(errno.ESTALE, f"{path} was replaced while the trace recorded ({why}): refused")


def _tighten(fd: int) -> bool:
    """Folders to 0750 at most, files to 0640; whether it is a folder."""
    st = os.fstat(fd)
    is_folder = stat.S_ISDIR(st.st_mode)
    os.fchmod(fd, stat.S_IMODE(st.st_mode) & (FOLDER_MODE if is_folder else FILE_MODE))
    return is_folder


def _tighten_at(name: str, dir_fd: int) -> None:
    try:
        fd = os.open(name, _NO_FOLLOW, dir_fd=dir_fd)
    except OSError:  # a link (not followed), or gone since the listing
        return
    try:
        _tighten(fd)
    finally:
        os.close(fd)
