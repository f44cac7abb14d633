"""``dyno``: the command line. Global options come before the subcommand, as in dynolog's dyno.

dyno --hostname node01 --certs-dir ./pki/client status
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Optional

import typer

from . import __version__
from .commands import certs, gputrace, npu_monitor, nputrace, processes, status, trace, version
from .connection import Target
from .exits import CliError

app = typer.Typer(
    name="dyno",
    help="Talk to the dynolog daemon of a node: health, registered processes, traces and monitoring.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _show_version(value: bool) -> None:
    if value:
        print(f"dyno {__version__}")
        raise typer.Exit()


@app.callback()
def global_options(
    ctx: typer.Context,
    hostname: str = typer.Option("localhost", "--hostname", help="host running dynolog"),
    port: int = typer.Option(1778, "--port", min=1, max=65535, help="dynolog's gRPC port"),
    certs_dir: Optional[str] = typer.Option(
        None, "--certs-dir", help="directory with ca.crt, client.crt, client.key for mutual TLS, or NO_CERTS"
    ),
    key_password_file: Optional[str] = typer.Option(
        None,
        "--key-password-file",
        help="file with the password of an encrypted client.key (or $DYNO_KEY_PASSWORD)",
    ),
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="seconds to wait for the daemon"),
    json_output: bool = typer.Option(False, "--json", help="machine-readable JSON on stdout, nothing else"),
    _version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="print dyno's version and exit"
    ),
) -> None:
    ctx.obj = Target(
        hostname=hostname,
        port=port,
        certs_dir=certs_dir,
        timeout=timeout,
        json=json_output,
        key_password_file=key_password_file,
    )


def _command(name: str, run: Callable[..., None], on: typer.Typer = app) -> None:
    """Register a subcommand; a CliError it raises becomes its message on stderr and its exit code."""

    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            run(*args, **kwargs)
        except CliError as exc:
            print(f"dyno: {exc}", file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None

    on.command(name)(wrapper)


_command("status", status.run)
_command("version", version.run)
_command("processes", processes.run)
_command("nputrace", nputrace.run)
_command("gputrace", gputrace.run)
_command("trace", trace.run)
_command("npu-monitor", npu_monitor.run)
for _name, _run in certs.COMMANDS:
    _command(_name, _run, on=certs.app)
app.add_typer(certs.app, name="certs")


def main() -> None:
    app(prog_name="dyno")


if __name__ == "__main__":
    main()
