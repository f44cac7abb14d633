"""Real processes for tests: the daemon, `dyno`, and training jobs, each started and stopped by the test.

The one place for the helpers tests (and benchmarks/, through ``_bench``) share: a test module keeps
only what is its own. Nothing here sleeps to synchronise: the daemon announces readiness on stdout,
workloads announce themselves the same way, state changes are awaited with :func:`wait_until` and a
stream's lines with :func:`read_until`, each against a deadline. Every run of the CLI goes through
:class:`Dyno` (``daemon.dyno``, or the module's ``dyno`` for none).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
WORKLOADS = Path(__file__).resolve().parent / "workloads"
# Kineto polls every 1 s instead of 5 s with this base config (reference/kineto.md §5 run I).
KINETO_1S_CONFIG = WORKLOADS / "kineto_1s.conf"
T = TypeVar("T")
Completed = subprocess.CompletedProcess[str]
# The exit status a run must end with: one, any of several, or None for whatever it is (the test looks).
Expect = Union[int, Collection[int], None]
Environment = Mapping[str, Optional[str]]


def free_port() -> int:
    """A TCP port on 127.0.0.1 the OS just handed out and nobody listens on (until someone binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_stat(pid: int) -> List[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces and parentheses):
    ``[0]`` the state, ``[1]`` the parent pid, ``[11]``/``[12]`` utime/stime in clock ticks. OSError when
    the process is gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def parent_of(pid: int) -> int:
    return int(proc_stat(pid)[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of process *pid*, all threads, from the kernel's accounting (clock-tick resolution)."""
    fields = proc_stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until(
    probe: Callable[[], Optional[T]], timeout: float = 20.0, what: str = "condition", pause: float = 0.2
) -> T:
    """Re-evaluate *probe* until it returns something truthy, and return that; fail naming *what* after
    *timeout*. The pause between probes doubles up to *pause*: a probe that is cheap and must be seen
    at once (an in-process flag before a timer fires) passes a small one."""
    deadline = time.monotonic() + timeout
    delay = min(0.01, pause)
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(delay)  # back-off between probes of an observable state, not synchronisation
        delay = min(delay * 2, pause)


class _LineReader:
    """Lines from a pipe, read with os.read: a buffered readline() after select() can hold the next
    line in Python's buffer while select() waits on the empty pipe."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.eof = fd, b"", False

    def readline(self, deadline: Optional[float]) -> Optional[str]:
        """The next line, or None at end of file or, with a *deadline*, when it passes first."""
        while b"\n" not in self.buffer and not self.eof:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and (
                remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]
            ):
                return None
            chunk = os.read(self.fd, 65536)
            self.eof = not chunk
            self.buffer += chunk
        if not self.buffer:
            return None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace") + "\n"


_readers: weakref.WeakKeyDictionary[subprocess.Popen, _LineReader] = weakref.WeakKeyDictionary()  # type: ignore[type-arg]


def drain(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Consume a process's stdout until it closes."""
    assert proc.stdout is not None
    reader = _readers.setdefault(proc, _LineReader(proc.stdout.fileno()))
    with contextlib.suppress(OSError, ValueError):
        while reader.readline(None) is not None:
            pass


def rest_of_output(proc: subprocess.Popen, timeout: float = 30.0) -> str:  # type: ignore[type-arg]
    """What *proc* writes to stdout from here until it closes it (its exit), bounded by *timeout*."""
    assert proc.stdout is not None
    reader = _readers.setdefault(proc, _LineReader(proc.stdout.fileno()))
    deadline = time.monotonic() + timeout
    lines: List[str] = []
    while (line := reader.readline(deadline)) is not None:
        lines.append(line)
    assert reader.eof, f"still writing after {timeout}s:\n{''.join(lines)}"
    return "".join(lines)


def read_until(
    proc: subprocess.Popen,  # type: ignore[type-arg]
    pick: Callable[[str], Optional[T]],
    timeout: float = 30.0,
    what: str = "the line awaited",
) -> T:
    """Read *proc*'s stdout line by line until *pick* returns something other than None for one, and
    return that; fail with *what* and the output read if *proc* closes it or *timeout* passes first.
    A stream's counterpart of :func:`wait_until`: the lines are the events, nothing is polled."""
    assert proc.stdout is not None
    reader = _readers.setdefault(proc, _LineReader(proc.stdout.fileno()))
    seen: List[str] = []
    deadline = time.monotonic() + timeout
    while (line := reader.readline(deadline)) is not None:
        seen.append(line)
        picked = pick(line)
        if picked is not None:
            return picked
    proc.poll()
    raise AssertionError(
        f"no {what} within {timeout}s (exit code {proc.returncode}); output:\n{''.join(seen)}"
    )


def read_line_until(proc: subprocess.Popen, prefix: str, timeout: float = 30.0) -> str:  # type: ignore[type-arg]
    """Read *proc*'s stdout until a line starting with *prefix*; fail with its output if it exits."""
    return read_until(
        proc,
        lambda line: line.strip() if line.startswith(prefix) else None,
        timeout,
        f"line starting {prefix!r}",
    )


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:  # type: ignore[type-arg]
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return proc.returncode


@dataclass
class Daemon:
    """A real `dynolog` process with its own socket directory, log file and OS-chosen port.

    The socket directory is short (``/tmp/mmXXXXXXXX``): Kineto binds ``<dir>/dynoconfigclient<uuid>``,
    and a socket path may not exceed 107 bytes.
    """

    workdir: Path
    args: Sequence[str] = ()
    netns_of: Optional[int] = None  # run inside the network namespace of this pid
    open_files: Optional[int] = None  # its open files limit (soft and hard), as a host may set it
    proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
    port: int = 0
    ready_line: str = ""
    env: Dict[str, str] = field(default_factory=dict)

    socket_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mm", dir="/tmp")))

    @property
    def log_file(self) -> Path:
        return self.workdir / "dynolog.log"

    def command(self) -> List[str]:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        base = [str(BIN / "dynolog"), "--enable-ipc-monitor", "--port", "0", "--log-file", str(self.log_file)]
        for flag in ("--ipc-socket-dir", "--msmonitor-socket-dir"):  # never the user's real sockets
            if not any(a == flag or a.startswith(flag + "=") for a in self.args):
                base += [flag, str(self.socket_dir)]
        return base + list(self.args)

    def start(self) -> Daemon:
        cmd = self.command()
        if self.open_files is not None:
            cmd = ["prlimit", f"--nofile={self.open_files}:{self.open_files}", "--", *cmd]  # execs: same pid
        if self.netns_of is not None:
            cmd = nsenter(self.netns_of, cmd)
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **self.env}
        )
        self.ready_line = read_line_until(self.proc, "dynolog ready")
        self.port = int(self.ready_line.split("grpc=")[1].split()[0].rsplit(":", 1)[1])
        # Keep reading what it prints (gRPC's own messages, say), so a full pipe never blocks it.
        threading.Thread(target=drain, args=(self.proc,), daemon=True).start()
        return self

    def stop(self) -> int:
        return stop_process(self.proc) if self.proc is not None else 0

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    def restart(self) -> Daemon:
        self.stop()
        return self.start()

    @property
    def dyno(self) -> Dyno:
        """`dyno` pointed at this daemon (inside its network namespace, if it has one)."""
        return Dyno(("--port", str(self.port)), netns_of=self.netns_of)

    def dyno_json(self, *args: str) -> Any:
        return self.dyno.json(*args)

    def processes(self) -> List[Dict[str, Any]]:
        return self.dyno_json("processes")  # type: ignore[no-any-return]

    def process(self, pid: int) -> Optional[Dict[str, Any]]:
        return next((p for p in self.processes() if p["pid"] == pid), None)

    def client_env(self) -> Dict[str, str]:
        """Environment for a process that should reach this daemon."""
        return {"KINETO_IPC_SOCKET_DIR": str(self.socket_dir)}

    def plugin_env(self, **extra: str) -> Dict[str, str]:
        """Environment for a job whose msmonitor plugin registers with this daemon, plus *extra*."""
        return {**self.client_env(), "MSMONITOR_USE_DAEMON": "1", **extra}

    def wait_registered(self, pid: int, backend: str = "torch", timeout: float = 20.0) -> None:
        """Until process *pid* has registered with *backend* (the plugin in a PyTorch job: torch)."""
        wait_until(
            lambda: (self.process(pid) or {}).get("backend") == backend,
            timeout,
            what=f"process {pid} to register ({backend})",
        )

    def kineto_env(self) -> Dict[str, str]:
        """Environment for stock PyTorch polling this daemon every second (not Kineto's 5 s)."""
        return {**self.client_env(), "KINETO_USE_DAEMON": "1", "KINETO_CONFIG": str(KINETO_1S_CONFIG)}


def trainer(
    daemon: Daemon,
    start_workload: Callable[..., Workload],
    rank: int = 0,
    args: Sequence[str] = (),
    script: str = "train.py",
    **env: str,
) -> Workload:
    """A PyTorch job (tests/workloads/*script*, the plugin on) of *rank*, once registered with *daemon*.

    *start_workload* is the fixture of that name (or anything taking ``script, env, *args``), which
    stops the job at the end."""
    job = start_workload(script, daemon.plugin_env(RANK=str(rank), **env), *args)
    daemon.wait_registered(job.pid)
    return job


def nsenter(pid: int, cmd: Sequence[str]) -> List[str]:
    return ["nsenter", f"--net=/proc/{pid}/ns/net", "--", *cmd]


def environment(changes: Environment) -> Dict[str, str]:
    """This process's environment with *changes*: a value sets the variable, None takes it out."""
    merged = {**os.environ, **changes}
    return {name: value for name, value in merged.items() if value is not None}


def _expected(status: int, expect: Expect) -> bool:
    if expect is None:
        return True
    return status == expect if isinstance(expect, int) else status in expect


@dataclass(frozen=True)
class Dyno:
    """The `dyno` command line as tests run it, with what all of a test's calls share: the global
    options before the command (a daemon's port, certificates), a working folder, a network namespace.

    ``Dyno()(...)`` (or the module's :data:`dyno`) runs it with nothing shared."""

    options: Sequence[str] = ()
    cwd: Optional[Path] = None
    netns_of: Optional[int] = None  # run inside the network namespace of this pid
    timeout: float = 60.0  # a hung CLI fails its test instead of the suite's timeout killing all of it

    def command(self, *args: str) -> List[str]:
        """The argv, for a test that starts it itself (a watch read line by line, say)."""
        cmd = [str(BIN / "dyno"), *self.options, *args]
        return nsenter(self.netns_of, cmd) if self.netns_of is not None else cmd

    def __call__(
        self,
        *args: str,
        expect: Expect = None,
        env: Optional[Environment] = None,
        input: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Completed:
        """Run it to its end, output captured as text. *env* changes this process's environment (None
        takes a variable out); stdin is *input*, else empty (a command that reads it must not wait on
        the terminal); an exit status other than *expect* fails with the command and its output."""
        cmd = self.command(*args)
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=self.timeout if timeout is None else timeout,
            cwd=self.cwd,
            env=environment(env) if env is not None else None,
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
        )
        if not _expected(result.returncode, expect):
            raise AssertionError(
                f"{' '.join(cmd)} exited {result.returncode}, not {expect}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def json(self, *args: str, env: Optional[Environment] = None) -> Any:
        """`dyno --json ...` parsed; exit 1 (the daemon said ineffective or failed) still carries JSON."""
        result = self("--json", *args, expect=(0, 1), env=env)
        if not result.stdout:
            raise AssertionError(f"dyno --json {' '.join(args)} printed nothing:\n{result.stderr}")
        return json.loads(result.stdout)


dyno = Dyno()


@dataclass
class Workload:
    """A Python child process from tests/workloads that prints ``ready pid=N`` and runs until stopped."""

    script: str
    env: Dict[str, str]
    args: Sequence[str] = ()
    netns_of: Optional[int] = None  # run inside the network namespace of this pid
    launcher: Sequence[str] = ()  # a command that runs it, e.g. unshare for a pid namespace
    proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
    pid: int = 0  # as the workload sees itself
    python: str = sys.executable  # a peer's own interpreter (its virtual environment) may run it instead
    ready_timeout: float = 45.0  # within the suite's minute a test, with room for the test itself
    ready: str = ""  # its ready line

    def start(self) -> Workload:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MSMONITOR_", "KINETO_"))}
        cmd = [*self.launcher, self.python, str(WORKLOADS / self.script), *self.args]
        self.proc = subprocess.Popen(
            nsenter(self.netns_of, cmd) if self.netns_of is not None else cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**env, **self.env},
        )
        self.ready = read_line_until(self.proc, "ready", timeout=self.ready_timeout)
        self.pid = int(self.ready.split("pid=")[1].split()[0])
        return self

    def stop(self) -> int:
        """Close stdin (the workload's signal to finish) and wait for it to exit."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        return stop_process(self.proc)

    def kill(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, signal.SIGKILL)
