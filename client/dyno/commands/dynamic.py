"""``dyno dynamic``: msprof's dynamic mode — attach to processes (or launch one), then start and stop
collection windows at a prompt, as often as needed. The conversation itself is
:mod:`dyno.session.interactive`."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from argparse import Namespace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from msmonitor_contract.kinds import DYNAMIC
from msmonitor_contract.values import int_list
from msmonitor_contract.vocabulary import KINETO_QUIET

from ..declared import declared, request
from ..exits import EXIT_USAGE, CliError
from ..flags import Command, Flag, check_fields
from ..fleet.target import Target, absolute_path

if TYPE_CHECKING:  # subprocess, socket and the rest only when a session runs: `dyno --help` loads this
    import subprocess

    from ..session.interactive import Ending

# The declaration's, but --pid (attach to these) is the one target, and --launch-timeout counts only when
# dyno launches the job.
FLAGS = (
    *declared(
        DYNAMIC,
        skip=("targets.job_id", "targets.ranks", "targets.process_limit"),
        targets__pids=Flag(
            "--pid", "targets.pids", int_list, None, "attach to these running processes", aliases=("--pids",)
        ),
    ),
    Flag(
        "--output",
        None,
        str,
        None,
        "where the PROF_ directories go, on the job's node (default: here, when the daemon is local)",
    ),
    Flag("--app-log", None, str, None, "launch mode: append the job's stdout and stderr to this file"),
    Flag("command", None, str, None, "launch mode: the job to start, and its arguments", repeat=True),
)
PROFILING_OPTIONS = "PROFILING_OPTIONS"
_JOB_EXIT_S = 5.0  # once dynolog ended a session, how long a launched job has to exit for dyno to see it
_NOT_FOUND, _NOT_EXECUTABLE = 127, 126  # a shell's exit codes, when the job cannot start


def run(target: Target, args: Namespace) -> None:
    r"""Start and stop collection windows at a prompt, as often as needed (msprof's dynamic mode).

    Attach to running processes (--pid), or launch a job (after --) and attach to it. Then type
    start and stop: each window becomes one PROF_ directory per process under --output. Commands:
    start, stop, status, quit (q), help (h), sleep SECONDS; end of input and Ctrl-C quit too.
    A launched job keeps running when dyno quits; when it exits, dyno exits with its code. A SIGTERM
    to dyno goes on to the launched job (as msprof's), and dyno exits with its status once it ends.

    Examples:
      dyno dynamic --pid 4242 --output /data/prof
      dyno dynamic --pid 4242,4243 --output /data/prof --task-time=l1 --aicpu=on --hccl
      dyno dynamic --output /data/prof -- python train.py --lr 3e-4
      printf 'start\nsleep 5\nstop\nquit\n' | dyno dynamic --pid 4242 --output /data/prof --json
    """
    _check_usage(target, args)  # before gRPC loads: a usage error answers at once
    from ..edge.rpc import Daemon
    from ..session import interactive

    output = absolute_path(target, args.output) if args.output else os.getcwd()
    attach = request(DYNAMIC, FLAGS, args, output=output, client=_identity())
    errors = DYNAMIC.check(attach)
    if args.command:  # the job's pid is known once it started, after these checks
        errors = [e for e in errors if e.field != "targets.pids"]
    else:  # the processes run already: nothing to wait for
        attach = dataclasses.replace(attach, wait_registration_s=0.0)
    check_fields(errors)
    io, prompt = interactive.console(target.json)
    daemon = Daemon(target, "dyno dynamic")
    job = None
    if args.command:
        daemon.ping()  # no job without a daemon that holds sessions
        job = _launch(args.command, args.app_log)
        attach = dataclasses.replace(attach, targets=dataclasses.replace(attach.targets, pids=(job.pid,)))
    with _Forward(job) as forward, contextlib.ExitStack() as scope:
        ending = interactive.Session(io, prompt).run(
            lambda requests: scope.enter_context(daemon.dynamic(requests)), attach, job
        )
        scope.close()  # the session's call, before waiting for the job
        _finish(ending, job, forward.sent)


def _check_usage(target: Target, args: Namespace) -> None:
    """What cannot work as typed: raised before anything loads, connects or starts."""
    if bool(args.pid) == bool(args.command):
        raise CliError(
            f"give --pid or a command to launch, not both (the command: {' '.join(args.command)})"
            if args.pid
            else "name the processes: --pid N,N to attach to running ones, or -- COMMAND ... to launch one",
            EXIT_USAGE,
        )
    if args.command and not target.local:
        raise CliError(
            f"launch mode starts the job on this host; to profile a job on {target.hostname}, start it "
            "there with MSMONITOR_USE_DAEMON=1 and attach with --pid",
            EXIT_USAGE,
        )
    if args.command and PROFILING_OPTIONS in os.environ:
        raise CliError(
            f"{PROFILING_OPTIONS} is set: it conflicts with dynamic collection (as with msprof's dynamic "
            "mode); unset it to launch the job",
            EXIT_USAGE,
        )
    if args.output is None and not target.local:
        raise CliError(
            f"--output is required with a remote daemon (--hostname {target.hostname}): the directory on "
            "that node where the PROF_ directories go",
            EXIT_USAGE,
        )


def _launch(command: List[str], app_log: Optional[str]) -> subprocess.Popen[bytes]:
    """Start the job, its plugin told to register with dynolog; its output to the terminal or *app_log*.

    Kineto is told to keep quiet (unless the user's environment sets KINETO_LOG_LEVEL): each window
    would otherwise print its start and stop notes over the prompt the job shares the terminal with."""
    import subprocess

    try:
        log = open(app_log, "ab") if app_log else None  # noqa: SIM115 (closed below, in finally)
    except OSError as exc:
        raise CliError(f"--app-log: cannot open {app_log}: {exc.strerror}", EXIT_USAGE) from None
    try:
        return subprocess.Popen(
            command,
            env={"KINETO_LOG_LEVEL": KINETO_QUIET, **os.environ, "MSMONITOR_USE_DAEMON": "1"},
            stdin=subprocess.DEVNULL,  # dyno reads the commands
            stdout=log,
            stderr=subprocess.STDOUT if log else None,
            start_new_session=True,  # Ctrl-C, which quits dyno, does not reach the job
        )
    except OSError as exc:
        code = _NOT_FOUND if isinstance(exc, FileNotFoundError) else _NOT_EXECUTABLE
        raise CliError(f"cannot start {command[0]}: {exc.strerror}", code) from None
    finally:
        if log is not None:
            log.close()  # the job has its own copy


class _Forward:
    """Launch mode: a SIGTERM to dyno is sent on to the job's process group (the job runs in its own
    session, so no signal reaches it otherwise), as msprof's dynamic mode sends it to the application it
    launched; dyno then waits for the job and exits with its status (:func:`_finish`). Ctrl-C is not
    sent on: it quits the prompt, and the job keeps running. Attach mode changes nothing."""

    def __init__(self, job: Optional[subprocess.Popen[bytes]]) -> None:
        self._job = job
        self._previous: Any = None
        self.sent = False  # a SIGTERM went to the job

    def __enter__(self) -> _Forward:
        import signal

        if self._job is not None:
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._job is not None:
            signal.signal(signal.SIGTERM, self._previous)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        assert self._job is not None
        self.sent = True
        # os.write: a handler may run inside a print to stderr, which print would refuse to re-enter.
        os.write(2, f"dyno: SIGTERM sent on to the job (pid {self._job.pid}); waiting for it\n".encode())
        with contextlib.suppress(ProcessLookupError, PermissionError):  # it has exited already
            os.killpg(self._job.pid, signum)


def _finish(ending: Ending, job: Optional[subprocess.Popen[bytes]], forwarded: bool = False) -> None:
    """Exit as the session ended: 0 when the user quit; a launched job's status when it exited (or when
    dyno's SIGTERM was sent on to it, *forwarded*: however the session ended, once it exits); else 1."""
    if job is not None and forwarded:
        words, code = _job_exit(job.wait())  # a SIGTERM now goes on to the job again
        raise CliError(f"the job {words}", code)
    if ending.by_user:
        if job is not None:
            print(f"dyno: the job keeps running (pid {job.pid})", file=sys.stderr)
        return
    status = _reap(job, _JOB_EXIT_S if ending.attached else 0) if job is not None else None
    if status is not None:
        words, code = _job_exit(status)
        if not ending.attached:
            raise CliError(
                f"the job {words} before it registered with dynolog "
                "(is msmonitor-plugin installed in its Python?)"
            )
        raise CliError(f"the job {words}", code)
    why = "dynolog ended the session" if ending.attached else "dynolog did not attach"
    raise CliError(f"{why}; the job keeps running (pid {job.pid})" if job is not None else why)


def _job_exit(returncode: int) -> Tuple[str, int]:
    """How a job ended, in words, and the exit status a shell gives it (128+N for signal N)."""
    import signal

    if returncode >= 0:
        return f"exited with code {returncode}", returncode
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"was killed by {name}", 128 - returncode


def _reap(job: subprocess.Popen[bytes], wait_s: float) -> Optional[int]:
    import subprocess

    try:
        return job.wait(wait_s)
    except subprocess.TimeoutExpired:
        return None


def _identity() -> Dict[str, Any]:
    """Who is asking, for dynolog's log and ``dyno processes`` (HELD BY)."""
    import getpass
    import socket

    user = ""
    with contextlib.suppress(KeyError, OSError):  # a uid without a name, as in some containers
        user = getpass.getuser()
    return {"user": user, "uid": os.getuid(), "hostname": socket.gethostname(), "pid": os.getpid()}


COMMAND = Command("dynamic", run, FLAGS)
