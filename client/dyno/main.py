"""``dyno``: the command line. Global options come before the subcommand, as in dynolog's dyno, or
after it.

dyno --hostname node01 --certs-dir ./pki/client status
dyno dynamic --pid 4242 --output /data/prof --json
dyno --hosts 'node[001-128]' --certs-dir ./pki/client status     # every node at once (dyno.fleet.fanout)

Every failure is a :class:`~dyno.exits.CliError`, printed here as ``dyno: message`` on stderr with its
exit code. Everything printed passes :func:`~dyno.output.escaped_terminal`; a reader that leaves early
(``dyno processes | head``) ends dyno quietly, here too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Callable, Dict, Iterator, NoReturn, Optional, Sequence

from msmonitor_contract.vocabulary import DEFAULT_PORT

from . import __version__
from .exits import EXIT_USAGE, CliError
from .flags import Command, Flag
from .fleet.target import DEFAULT_PARALLEL, DEFAULT_TIMEOUT_S, KEY_PASSWORD_ENV, NO_CERTS, Target
from .output import escaped_terminal

HELP = """Talk to the dynolog daemon of a node: health, registered processes, traces and monitoring.

Many nodes at once: name them with --hosts (a Slurm hostlist), --hostfile or --slurm-job instead of
--hostname. Every host is asked in parallel, each within its own --timeout; the answers print as one
table with a HOST column and a summary line (--json: one object per host). Exit status: 0 when every
host answered effective, 1 when some did not, 3 when none could be reached.
  dyno --hosts 'node[001-016]' --certs-dir ~/pki/client status
  dyno --slurm-job 731244 nputrace --duration-ms 3000 --log-file /data/traces --sync --wait"""

GLOBAL_FLAGS = (
    Flag("--hostname", "hostname", str, "localhost", "host running dynolog"),
    Flag("--port", "port", int, DEFAULT_PORT, "dynolog's gRPC port", minimum=1, maximum=65535),
    Flag(
        "--certs-dir",
        "certs_dir",
        str,
        None,
        f"directory with ca.crt, client.crt, client.key for mutual TLS, or {NO_CERTS}",
    ),
    Flag(
        "--key-password-file",
        "key_password_file",
        str,
        None,
        f"file with the password of an encrypted client.key (or ${KEY_PASSWORD_ENV})",
    ),
    Flag(
        "--timeout",
        "timeout",
        float,
        DEFAULT_TIMEOUT_S,
        "seconds to wait for the daemon (each host's own)",
        minimum=0.1,
    ),
    Flag(
        "--hosts",
        "hosts",
        str,
        None,
        "run on these hosts instead of --hostname: a Slurm hostlist, e.g. 'node[001-128]' or 'a,b'; "
        "a host may name its port, 'node[01-04]:1779'",
    ),
    Flag(
        "--hostfile",
        "hostfile",
        str,
        None,
        "run on the hosts in this file: one per line (or a hostlist), # starts a comment",
    ),
    Flag("--slurm-job", "slurm_job", str, None, "run on the nodes of this Slurm job (asks scontrol)"),
    Flag(
        "--parallel",
        "parallel",
        int,
        DEFAULT_PARALLEL,
        "hosts asked at once by --hosts/--hostfile/--slurm-job",
        minimum=1,
    ),
    Flag("--json", "json", bool, False, "machine-readable JSON on stdout, nothing else"),
)


def main(argv: Optional[Sequence[str]] = None) -> None:
    with _ctrl_c_remembered() as pressed:
        try:
            with escaped_terminal():
                try:
                    _dyno(sys.argv[1:] if argv is None else argv)
                    sys.stdout.flush()  # here, not at exit: a reader gone is seen where it is handled
                except CliError as exc:
                    if pressed():  # a failure the Ctrl-C caused (a call cut short): the stop is the news
                        _interrupted()
                    print(f"dyno: {exc}", file=sys.stderr)
                    sys.exit(exc.exit_code)
                except BrokenPipeError:
                    _reader_gone()
        except (KeyboardInterrupt, Exception) as exc:
            if isinstance(exc, KeyboardInterrupt) or pressed():
                _interrupted()
            raise


@contextlib.contextmanager
def _ctrl_c_remembered() -> Iterator[Callable[[], bool]]:
    """While dyno runs, Ctrl-C raises KeyboardInterrupt as Python's own handler does, and is remembered:
    it does not always arrive as KeyboardInterrupt (one that lands while gRPC's Cython core is being
    imported surfaces as an ImportError). Yields whether it was pressed."""
    if threading.current_thread() is not threading.main_thread():  # dyno called in-process, off main
        yield lambda: False
        return
    pressed = threading.Event()

    def remember(signum: int, frame: Any) -> None:
        pressed.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, remember)
    try:
        yield pressed.is_set
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted() -> NoReturn:
    """Ctrl-C where dyno has nothing of its own to say (a wait for the daemon, a wait for processes):
    end as a program SIGINT ended, without Python's traceback. Ended by the signal itself, not an exit
    status, so that a shell loop running dyno stops too (bash tells the two apart)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    sys.exit(128 + signal.SIGINT)  # not reached: the signal ends the process


def _reader_gone() -> NoReturn:
    """stdout's reader closed it: stop without a traceback, with the status of a program SIGPIPE ended
    (141 in a shell). stdout is pointed at /dev/null first, so the interpreter's last flush of what is
    still buffered does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(128 + signal.SIGPIPE)


def _dyno(argv: Sequence[str]) -> None:
    from . import app  # typer and click: after the signal handler is set

    app.run(_build, argv)


def _build() -> Any:
    """The command line: the global options, then the listed commands (imported when they run)."""
    import inspect

    import typer
    from typer._completion_classes import completion_init

    from . import app, completion
    from .commands import COMMANDS

    completion_init()  # typer's shells for `complete_bash` and the others (completion.py)
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("ctx", keyword, annotation=typer.Context)]
    parameters += [app.parameter(flag) for flag in GLOBAL_FLAGS]
    parameters += completion.parameters(version=__version__)
    return app.group("dyno", HELP, COMMANDS, GLOBAL_FLAGS, root=app.signed(_root, parameters))


def _root(ctx: Any, **values: Any) -> None:
    """The group's callback: the global options, kept for the command that runs."""
    if ctx.invoked_subcommand is None:
        raise CliError(f"missing command\n\n{ctx.get_help()}", EXIT_USAGE)
    ctx.obj = values
    ctx.meta["run"] = _run


def _run(prog: str, command: Command, chosen: Dict[str, Any], values: Dict[str, Any]) -> None:
    """*command* (``dyno certs init``: *prog*) with the global options *chosen* (as a Target) and its own
    parsed *values*."""
    from argparse import Namespace

    target = Target(**{flag.field: chosen[flag.dest] for flag in GLOBAL_FLAGS if flag.field})
    if target.fans_out and target.hostname != "localhost":
        raise CliError(
            f"--hostname {target.hostname} and --hosts/--hostfile/--slurm-job both name the hosts: "
            "use --hostname for one, the others for many",
            EXIT_USAGE,
        )
    args = Namespace(**values)
    if not target.fans_out:
        command.run(target, args)
    elif command.across is not None:
        command.across(target, args)
    else:
        raise CliError(
            f"'{prog}' works with one daemon (or none): --hosts, --hostfile and --slurm-job do not apply",
            EXIT_USAGE,
        )


if __name__ == "__main__":
    main()
