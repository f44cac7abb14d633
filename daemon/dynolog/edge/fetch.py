"""``FetchTraceFiles``: a trace's files, streamed in chunks to ``dyno … --collect`` (and how any served
file is checked, opened and streamed: ``FetchMonitorFiles`` too, see :mod:`.monitor_files`).

A process reports its own files over the IPC, so what it reports is not trusted as a path to read: a
file is served only when the process reported it for this trace (or it lies in a folder the process
reported), it lies under the folder the trace request named (``ProcessTrace.root``, which the daemon set
and the process cannot change) with no symbolic link below that folder, it is a regular file owned by
the process's user (the kernel's word at registration), and — when the daemon has ``--trace-root`` —
under one of those. So neither the process nor anyone who can write into its folder makes the daemon
serve another file. Who may call it is auth's business: not a Get/List/Watch, so operators only.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from typing import AsyncIterator, BinaryIO, Iterable, Iterator, List, Optional, Protocol, Sequence

from msmonitor_contract.vocabulary import TracePhase

from ..core.paths import check_output_path
from ..core.traces import ProcessTrace, Trace

CHUNK_BYTES = 1 << 20  # well under gRPC's 4 MiB message limit; big enough that headers cost nothing
TRACE_SUFFIXES = (".json", ".json.gz")  # Kineto's Chrome trace, as torch.profiler and Kineto name it


class Owner(Protocol):
    """The process whose files are served: who it is, the folder the daemon named for its output (which
    it cannot change: nothing outside is served) and its user (the files must be that user's)."""

    @property
    def pid(self) -> int: ...
    @property
    def host_pid(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def root(self) -> str: ...
    @property
    def uid(self) -> int: ...


@dataclass(frozen=True)
class Entry:
    """One file of one process to send, or why it (or, with no path, the process's files) is not sent."""

    process: Owner
    path: str = ""
    name: str = ""
    trace: bool = False
    error: str = ""


def entries(trace: Trace, roots: Sequence[str]) -> Iterator[Entry]:
    """Every file of the trace, by rank then process, each process's files in the order it reported."""
    for process in sorted(trace.processes.values(), key=lambda p: (p.rank, p.host_pid)):
        yield from _process_entries(process, roots)


def _process_entries(process: ProcessTrace, roots: Sequence[str]) -> Iterator[Entry]:
    who = f"pid {process.pid} (rank {process.rank})"
    if process.phase != TracePhase.FINISHED:
        error = f": {process.error}" if process.error else ""
        yield Entry(process, error=f"{who}: its trace is {process.phase.name.lower()}{error}, no files yet")
        return
    if not os.path.isabs(process.root):
        yield Entry(process, error=f"{who}: this daemon did not send the trace (it restarted since)")
        return
    for index, reported in enumerate(process.files):
        for path in _files_of(reported):
            name = os.path.relpath(path, process.root)
            # The process's Chrome trace is the first file it reports (the plugin and Kineto alike).
            is_trace = index == 0 and path == reported and path.endswith(TRACE_SUFFIXES)
            yield Entry(process, path, name, is_trace, refusal(path, process, roots))


def _files_of(reported: str) -> List[str]:
    """The file itself, or every file in a folder (torch_npu's ``*_ascend_pt``), links not followed."""
    if not os.path.isdir(reported) or os.path.islink(reported):
        return [reported]
    found = []
    for folder, dirs, files in os.walk(reported):
        dirs.sort()
        found += [os.path.join(folder, name) for name in sorted(files)]
    return found


def refusal(path: str, process: Owner, roots: Sequence[str]) -> str:
    """Why *path* is not served ("" when it is), on the path alone; the open file is checked again."""
    root = os.path.normpath(process.root)
    wanted = os.path.relpath(os.path.normpath(path), root)
    if wanted == os.pardir or wanted.startswith(os.pardir + os.sep):
        return f"{path}: outside its folder {process.root}"
    real_root = os.path.realpath(root)
    if os.path.relpath(os.path.realpath(path), real_root) != wanted:
        return f"{path}: a symbolic link below {process.root}: not served"
    return check_output_path(path, roots, "file") or ""


def _open(path: str, uid: int) -> BinaryIO:
    """The file, opened without following a link, once it proves a regular file of the process's user."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        if uid >= 0 and st.st_uid != uid:
            raise OSError(f"{path}: owned by uid {st.st_uid}, not by the process's user (uid {uid})")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@dataclass(frozen=True)
class Piece:
    """What the stream carries: one chunk of one file, or why the file (or process) is not sent."""

    entry: Entry
    error: str = ""
    size: int = 0  # of the whole file
    offset: int = 0
    data: bytes = b""


async def chunks(files: Iterable[Entry]) -> AsyncIterator[Piece]:
    """The files as chunks, one file after the other; a file that cannot be read is one piece with its
    error, and the next file follows. Disk reads run off the event loop."""
    for entry in files:
        if entry.error:
            yield Piece(entry, entry.error)
            continue
        async for piece in _file_chunks(entry):
            yield piece


async def _file_chunks(entry: Entry) -> AsyncIterator[Piece]:
    try:
        f = await asyncio.to_thread(_open, entry.path, entry.process.uid)
    except OSError as exc:
        yield Piece(entry, str(exc) if not exc.strerror else f"{entry.path}: {exc.strerror.lower()}")
        return
    with f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while True:
            data: Optional[bytes] = await asyncio.to_thread(f.read, CHUNK_BYTES)
            if not data and offset:  # an empty file is still one chunk: the reader makes it
                return
            yield Piece(entry, size=size, offset=offset, data=data or b"")
            offset += len(data or b"")
            if not data:
                return
