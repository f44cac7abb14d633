"""``--collect DIR``: a trace's files, fetched from every host that took it (``FetchTraceFiles``) into one
local folder laid out as HolisticTraceAnalysis reads a job — ``TraceAnalysis(trace_dir=DIR)`` loads
every ``*.json`` / ``*.json.gz`` at the top of the folder as one rank's trace, the rank read from the
trace's ``distributedInfo``:

    DIR/<host>_rank<R>_pid<P>.pt.trace.json   each process's Chrome trace (its own suffix kept)
    DIR/<host>_rank<R>_pid<P>/<name>          its other files (summaries, torch_npu's folder), by the
                                              name they have under the trace's --log-file on the host

``<host>`` is the host as dyno reached it (each named once in a fan-out), ``<P>`` the pid on that host:
two processes never share a name. ``dyno npu-monitor --collect DIR`` fetches the monitors' --log-file
files (``FetchMonitorFiles``) as msprof-analyze reads a job — ``msprof-analyze cluster -d DIR`` takes
each ``msmonitor_<pid>_<time>_<rank>.db`` up to five folders down as one rank, by that name:

    DIR/<host>/msmonitor_<pid>_<time>_<rank>.db   each process's files, named as on the host

Each file is written as a hidden ``.part`` and linked into place only
when complete, so a reader never sees half a trace; an existing file is never replaced (it is named as
not fetched instead), and the ``.part`` never outlives its fetch. Each folder is made by the fetch that
writes into it and reached by descriptor (:class:`Folders`): one already there (a link another user
planted in a shared DIR, say), or swapped after it was made, is refused, never followed. What a
daemon sends is checked: no name leaves DIR or nests deeper than :data:`MAX_DEPTH`, and no file grows
past the size announced for it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import sys
from argparse import Namespace
from typing import IO, Any, Callable, List, NamedTuple, Optional, Sequence, Set, TextIO, Tuple

from msmonitor_contract.targets import Targets
from msmonitor_contract.vocabulary import MONITOR_FILE

from ..exits import EXIT_USAGE, CliError
from ..fleet import fanout
from ..fleet.target import Target
from ..model.traces import FileChunk

MIB = 1 << 20
PROGRESS_EVERY = 64 * MIB  # a progress line per this much of one file; smaller files get none
TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")  # longest first
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# Folders in a file's name under its process's folder: torch_npu's deepest output is 3 (PROF_…/
# ASCEND_PROFILER_OUTPUT/…); a daemon's thousand-level name is refused, not made.
MAX_DEPTH = 16


class Collected(NamedTuple):
    """What one host gave: the files written (paths in DIR), their bytes, and what it could not give."""

    files: List[str]
    size: int
    failed: List[str]


def check(args: Namespace) -> None:
    """``--collect`` on a trace command fetches what ``--wait`` saw written: without it, nothing is."""
    if args.collect and not args.wait:
        raise CliError("--collect fetches the files once every process wrote them: add --wait", EXIT_USAGE)


# A daemon's stream of files (the daemon, the deadline), and where each of its files goes in DIR (the
# chunk, the host as dyno reached it).
Stream = Callable[[Any, float], Any]
Naming = Callable[[FileChunk, str], str]


class Source(NamedTuple):
    """One daemon to fetch files from, and how."""

    target: Target
    stream: Stream
    naming: Naming


class Gathered(NamedTuple):
    """What every host gave: how many files came, and how many could not be fetched."""

    files: int
    failed: int


def requested(args: Namespace, sources: Sequence[Tuple[Target, str]], quiet: bool) -> str:
    """With ``--collect DIR``, each (host, trace id)'s files gathered into DIR; without it, nothing. Why
    some file is missing, or "" when none is."""
    if not (args.collect and sources):
        return ""
    fetched = [Source(one, _trace_files(trace_id), local_name) for one, trace_id in sources]
    failed = gather(fetched, args.collect, args.wait_timeout, quiet).failed
    return f"{failed} of the trace's files could not be fetched into {args.collect}" if failed else ""


def _trace_files(trace_id: str) -> Stream:
    return lambda daemon, timeout: daemon.fetch_trace_files(trace_id, timeout)


def _monitor_files(targets: Targets) -> Stream:
    return lambda daemon, timeout: daemon.fetch_monitor_files(targets, timeout)


def monitors(fleet: Sequence[Target], targets: Targets, folder: str, timeout: float, quiet: bool) -> str:
    """``dyno npu-monitor --collect DIR``: every host's monitor files of *targets* into DIR. Why some
    file is missing, or none came at all; "" when all came."""
    fetched = [Source(one, _monitor_files(targets), monitor_name) for one in fleet]
    gathered = gather(fetched, folder, timeout, quiet)
    if gathered.failed:
        return f"{gathered.failed} of the monitors' files could not be fetched into {folder}"
    if not gathered.files:
        return (
            "no npu-monitor files to fetch: no process these targets select was started with --log-file "
            "by the daemons asked"
        )
    return ""


def gather(sources: Sequence[Source], folder: str, timeout: float, quiet: bool) -> Gathered:
    """Fetch each source's files into *folder*, a few hosts at once; print what came (on stderr when
    *quiet*: stdout then holds --json), and why each missing file is."""
    os.makedirs(folder, exist_ok=True)
    by_target = {source.target: source for source in sources}

    def fetch(one: Target) -> Collected:
        return collect(by_target[one], folder, timeout, quiet)

    parallel = min((source.target.parallel for source in sources), default=1)
    outcomes = fanout.gather(list(by_target), fetch, parallel)
    failed = [f"{o.host}: {o.why}" for o in outcomes if o.answer is None]
    failed += [why for o in outcomes if o.answer is not None for why in o.answer.failed]
    files = [f for o in outcomes if o.answer is not None for f in o.answer.files]
    size = sum(o.answer.size for o in outcomes if o.answer is not None)
    out = sys.stderr if quiet else sys.stdout
    for why in failed:
        print(f"  not fetched: {why}", file=sys.stderr)
    hosts = len({o.host for o in outcomes if o.answer is not None and o.answer.files})
    print(
        f"collected {len(files)} file(s), {size / MIB:.1f} MiB, from {hosts} host(s) into {folder}", file=out
    )
    out.flush()
    return Gathered(len(files), len(failed))


def collect(source: Source, folder: str, timeout: float, quiet: bool) -> Collected:
    """One host's files into *folder*. A stream that breaks names the file it broke in; a daemon that
    cannot be asked at all is a :class:`CliError`, as for any call."""
    from ..edge.rpc import Daemon

    target = source.target
    writer = Writer(folder, target.label, source.naming, None if quiet else sys.stderr)
    try:
        with source.stream(Daemon(target, "--collect"), timeout) as stream:
            for chunk in stream:
                writer.take(chunk)
    except CliError as exc:
        if not writer.started:
            raise  # the edge words it: unreachable, refused, not found
        writer.fail_current(str(exc).splitlines()[0])
    finally:
        writer.close()
    return Collected(writer.files, writer.size, writer.failed)


def local_name(chunk: FileChunk, host: str) -> str:
    """Where *chunk*'s file goes, relative to DIR (see the module's docstring); ValueError when the name
    the daemon sent would leave its process's folder."""
    rank = f"_rank{chunk.rank}" if chunk.rank >= 0 else ""
    prefix = f"{_UNSAFE.sub('_', host)}{rank}_pid{chunk.host_pid}"
    if chunk.trace:
        suffix = next((s for s in TRACE_SUFFIXES if chunk.name.endswith(s)), ".json")
        return prefix + suffix
    parts = chunk.name.replace("\\", "/").split("/")
    if chunk.name.startswith("/") or not chunk.name or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{chunk.name!r} is not a name inside the trace's folder")
    if len(parts) > MAX_DEPTH:
        raise ValueError(f"{chunk.name[:60]!r}… is nested deeper than {MAX_DEPTH} folders")
    return os.path.join(prefix, *parts)


def monitor_name(chunk: FileChunk, host: str) -> str:
    """Where a monitor's file goes, relative to DIR: its host's folder, under the name it has there (the
    name msprof-analyze reads the rank from); ValueError for any other name a daemon sent."""
    if not MONITOR_FILE.fullmatch(chunk.name):
        raise ValueError(f"{chunk.name[:60]!r} is not an npu-monitor file's name")
    return os.path.join(_UNSAFE.sub("_", host), chunk.name)


class Folders:
    """DIR, and the folders one fetch makes in it. A file's folder is reached from DIR one level at a time
    by descriptor, never through a link, and each level must be a folder this fetch made, owned by its
    user: one already there (a link planted in a shared DIR, a previous fetch's) is refused, and so is
    one swapped for a link or for another user's folder after it was made, where a path would follow."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._made: Set[str] = set()  # relative to DIR

    def open(self, relative: str) -> int:
        """A descriptor of DIR/*relative* ("": DIR itself, as the user named it), made where missing;
        the caller closes it."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        path = ""
        try:
            for part in filter(None, relative.split(os.sep)):
                path = os.path.join(path, part)
                if path not in self._made:
                    self._make(fd, part, path)
                below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = below
                if os.fstat(fd).st_uid != os.geteuid():
                    raise OSError(f"{self._shown(path)} is another user's folder: nothing written into it")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _make(self, parent: int, part: str, path: str) -> None:
        try:
            os.mkdir(part, dir_fd=parent)  # never through a link: one there is "exists"
        except FileExistsError:
            raise OSError(
                f"{self._shown(path)} exists and this fetch did not make it: nothing written into it"
            ) from None
        self._made.add(path)

    def _shown(self, path: str) -> str:
        return os.path.join(self.root, path)


class _Part:
    """One file being received: a hidden temporary beside its final name, linked there when complete,
    all relative to its folder's descriptor (*folder*, which the part owns and closes)."""

    def __init__(self, folder: int, name: str, shown: str, size: int) -> None:
        self.folder, self.name, self.final, self.size, self.received = folder, name, shown, size, 0
        self.temp = f".{name}.{secrets.token_hex(4)}.part"
        try:
            if _exists(name, folder):
                raise OSError(f"{shown} exists: not overwritten")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            self.file: IO[bytes] = os.fdopen(os.open(self.temp, flags, 0o600, dir_fd=folder), "wb")
        except BaseException:
            os.close(folder)
            raise

    def write(self, chunk: FileChunk) -> None:
        if chunk.offset != self.received:
            raise OSError(f"{self.final}: a piece at byte {chunk.offset}, {self.received} expected")
        if self.received + len(chunk.data) > self.size:
            raise OSError(f"{self.final}: more than the {self.size} bytes announced came")
        self.file.write(chunk.data)
        self.received += len(chunk.data)

    def finish(self) -> None:
        """The file in place, if it came whole; the ``.part`` removed either way."""
        self.file.close()
        try:
            if self.received != self.size:  # a short stream, or the file changed size as it was read
                raise OSError(f"{self.final}: {self.received} of {self.size} bytes came")
            self._place()
        finally:
            self._release()

    def _place(self) -> None:
        folder = self.folder
        try:  # link fails if the name appeared meanwhile: nothing is replaced
            os.link(self.temp, self.name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        except FileExistsError:
            raise OSError(f"{self.final} exists: not overwritten") from None
        except OSError:  # a file system without hard links: look, then rename
            if _exists(self.name, self.folder):
                raise OSError(f"{self.final} exists: not overwritten") from None
            os.rename(self.temp, self.name, src_dir_fd=folder, dst_dir_fd=folder)

    def abort(self) -> None:
        self.file.close()
        self._release()

    def _release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.temp, dir_fd=self.folder)
        os.close(self.folder)


def _exists(name: str, folder: int) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


class Writer:
    """Writes one host's stream of chunks: a file is done when the next one starts, or the stream ends."""

    def __init__(self, folder: str, host: str, naming: Naming, progress: Optional[TextIO]) -> None:
        self.folder, self.host, self.naming, self.progress = folder, host, naming, progress
        self.files: List[str] = []
        self.failed: List[str] = []
        self.size = 0
        self.started = False  # a chunk came: the daemon found the trace
        self._key: Optional[Tuple[int, str]] = None  # (host pid, name) of the file being received
        self._part: Optional[_Part] = None
        self._name = ""
        self._folders = Folders(folder)

    def take(self, chunk: FileChunk) -> None:
        self.started = True
        if chunk.error:
            self._end()
            self.failed.append(f"{self.host}: {chunk.error}")
            return
        key = (chunk.host_pid, chunk.name)
        if key != self._key or chunk.offset == 0:
            self._end()
            self._key = key
            self._begin(chunk)
        if self._part is not None:
            self._write(chunk)

    def fail_current(self, why: str) -> None:
        """The stream broke: the file being received is named with why; no later file came."""
        name = f"{self._name}: " if self._part is not None else ""
        if self._part is not None:
            self._part.abort()
            self._part = None
        self.failed.append(f"{self.host}: {name}the stream broke ({why}); later files did not come")

    def close(self) -> None:
        self._end()

    def _begin(self, chunk: FileChunk) -> None:
        self._name = chunk.path or chunk.name
        try:
            name = self.naming(chunk, self.host)
            folder = self._folders.open(os.path.dirname(name))
            self._part = _Part(folder, os.path.basename(name), os.path.join(self.folder, name), chunk.size)
        except (OSError, ValueError) as exc:
            self._failed(exc)

    def _write(self, chunk: FileChunk) -> None:
        assert self._part is not None
        try:
            self._part.write(chunk)
        except OSError as exc:
            self._part.abort()
            self._part = None
            self._failed(exc)
            return
        self._report(self._part, len(chunk.data))

    def _end(self) -> None:
        part, self._part, self._key = self._part, None, None
        if part is None:
            return
        try:
            part.finish()
        except OSError as exc:
            self._failed(exc)
            return
        self.files.append(part.final)
        self.size += part.size

    def _failed(self, exc: BaseException) -> None:
        why = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else str(exc)
        self.failed.append(f"{self.host}: {self._name}: {why}")

    def _report(self, part: _Part, just: int) -> None:
        """A line each PROGRESS_EVERY bytes of a big file, so a long fetch shows it moves."""
        if self.progress is None or part.size < PROGRESS_EVERY:
            return
        if part.received // PROGRESS_EVERY != (part.received - just) // PROGRESS_EVERY or (
            part.received == part.size
        ):
            self.progress.write(
                f"  {self.host}: {self._name}: {part.received / MIB:.0f} of {part.size / MIB:.0f} MiB\n"
            )
            self.progress.flush()
