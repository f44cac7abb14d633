"""``dyno dynamic``: msprof's dynamic mode — attach to processes (or launch one), then start and stop
collection windows at a prompt, as often as needed. The conversation itself is
:mod:`dyno.session.interactive`."""

from __future__ import annotations

import contextlib
import os
import sys
from argparse import Namespace
from typing import TYPE_CHECKING, List, Optional, Tuple

from msmonitor_contract.vocabulary import (
    DEFAULT_DYNAMIC_COMMAND_LIMIT,
    DEFAULT_DYNAMIC_IDLE_TIMEOUT_S,
    DEFAULT_NPU_ACTIVITIES,
    FLAG_NAMES,
    KINETO_QUIET,
    split_list,
)

from ..cli import Command, Flag, check_fields, field_flag, fill, int_list, on_off
from ..exits import EXIT_USAGE, CliError
from ..fleet.target import Target, absolute_path

if TYPE_CHECKING:  # subprocess, socket and the rest only when a session runs: `dyno --help` loads this
    import subprocess

    from dynoproto import dynolog_pb2 as pb

    from ..session.interactive import Ending

FLAGS = (
    Flag("--pid", "targets.pids", int_list, None, "attach to these running processes", aliases=("--pids",)),
    Flag(
        "--output",
        None,
        str,
        None,
        "where the PROF_ directories go, on the job's node (default: here, when the daemon is local)",
    ),
    Flag("--activities", "options.activities", split_list, DEFAULT_NPU_ACTIVITIES, "CPU, NPU or both"),
    Flag("--record-shapes", "options.record_shapes", bool, False, "operator input shapes and types"),
    Flag("--profile-memory", "options.profile_memory", bool, False, "operator memory"),
    Flag("--with-stack", "options.with_stack", bool, False, "Python call stacks"),
    Flag("--with-modules", "options.with_modules", bool, False, "module hierarchy"),
    Flag("--task-time", "options.task_time", str, None, "task timing level: l0, l1, l2, on (= l1) or off"),
    Flag("--aic-metrics", "options.aic_metrics", str, None, "AI Core metrics, e.g. PipeUtilization"),
    Flag("--host-sys", "options.host_sys", split_list, None, "host data: some of cpu,mem,disk,network,osrt"),
    field_flag("options.export_type", str, None, "export format: text or db"),
    Flag("--runtime-api", "options.runtime_api", on_off, "off", "Runtime API calls"),
    Flag("--aicpu", "options.aicpu", on_off, "off", "AI CPU operators"),
    Flag("--model-execution", "options.model_execution", on_off, "off", "model execution (GE) timing"),
    Flag("--hccl", "options.hccl", on_off, "off", "HCCL communication"),
    Flag("--msproftx", "options.msproftx", on_off, "off", "msproftx / mstx markers"),
    Flag("--ascendcl", "options.ascendcl", on_off, "off", "AscendCL API calls"),
    Flag("--l2", "options.l2", on_off, "off", "L2 cache hit rates"),
    Flag("--sys-hardware-mem", "options.sys_hardware_mem", on_off, "off", "on-chip memory bandwidth"),
    field_flag(
        "idle_timeout_s",
        float,
        DEFAULT_DYNAMIC_IDLE_TIMEOUT_S,
        "seconds without a window before the session ends",
    ),
    Flag(
        "--command-limit",
        "command_limit",
        int,
        DEFAULT_DYNAMIC_COMMAND_LIMIT,
        "start/stop commands before the session ends",
    ),
    # set only when a launched job started (field None: fill leaves it unset when attaching to pids)
    Flag(
        FLAG_NAMES["wait_registration_s"],
        None,
        float,
        "60",
        "launch mode: seconds the job has to register",
        minimum=0,
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
    A launched job keeps running when dyno quits; when it exits, dyno exits with its code.

    Examples:
      dyno dynamic --pid 4242 --output /data/prof
      dyno dynamic --pid 4242,4243 --output /data/prof --task-time=l1 --aicpu=on --hccl
      dyno dynamic --output /data/prof -- python train.py --lr 3e-4
      printf 'start\nsleep 5\nstop\nquit\n' | dyno dynamic --pid 4242 --output /data/prof --json
    """
    _check_usage(target, args)  # before gRPC loads: a usage error answers at once
    from dynoproto import dynolog_pb2 as pb
    from msmonitor_contract.kinds import DYNAMIC

    from ..edge.connection import connect
    from ..session import interactive

    attach = fill(pb.DynamicAttach(), FLAGS, args)
    attach.output = absolute_path(target, args.output) if args.output else os.getcwd()
    _identify(attach.client)
    errors = DYNAMIC.check(attach)
    if args.command:  # the job's pid is known once it started, after these checks
        errors = [e for e in errors if e.field != "targets.pids"]
    check_fields(errors)
    io, prompt = interactive.console(target.json)
    with connect(target, "dyno dynamic") as stub:
        job = None
        if args.command:
            stub.GetStatus(pb.GetStatusRequest(), timeout=target.timeout)  # no job without a daemon
            job = _launch(args.command, args.app_log)
            attach.targets.pids.append(job.pid)
            attach.wait_registration_s = args.launch_timeout
        ending = interactive.Session(io, prompt).run(stub.Dynamic, attach, job)
    _finish(ending, job)


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


def _finish(ending: Ending, job: Optional[subprocess.Popen[bytes]]) -> None:
    """Exit as the session ended: 0 when the user quit; a launched job's status when it exited; else 1."""
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


def _identify(client: pb.DynamicClient) -> None:
    """Who is asking, for dynolog's log and ``dyno processes`` (HELD BY)."""
    import getpass
    import socket

    with contextlib.suppress(KeyError, OSError):  # a uid without a name, as in some containers
        client.user = getpass.getuser()
    client.uid = os.getuid()
    client.hostname = socket.gethostname()
    client.pid = os.getpid()


COMMAND = Command("dynamic", run, FLAGS)
