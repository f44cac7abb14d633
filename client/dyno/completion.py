"""``dyno``'s eager options: ``--version``, and shell completion as typer does it (``complete_bash``,
``complete_zsh``, ``complete_fish`` in ``_DYNO_COMPLETE``): ``--show-completion SHELL`` prints the
script, ``--install-completion`` installs it for the shell dyno runs in. Completing a command's name
reads the listing; a command's options load that command alone."""

from __future__ import annotations

import inspect
from typing import Annotated, Any, List, Optional

import click
import typer

PROG = "dyno"
COMPLETE_VAR = "_DYNO_COMPLETE"
SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


def parameters(version: str) -> List[inspect.Parameter]:
    """The eager options, as keyword parameters of the group's callback (their values are not kept)."""

    def show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value and not ctx.resilient_parsing:
            _print(f"dyno {version}")
            raise typer.Exit()

    return [
        _keyword(
            "version",
            bool,
            typer.Option(
                "--version",
                callback=show_version,
                help="print dyno's version and exit",
                is_eager=True,
                expose_value=False,
            ),
        ),
        _keyword(
            "show_completion",
            Optional[str],
            typer.Option(
                "--show-completion",
                metavar="SHELL",
                parser=_shell,
                callback=_show,
                help="print the completion script for SHELL (bash, zsh, fish), to add to its start-up file",
                is_eager=True,
                expose_value=False,
            ),
        ),
        _keyword(
            "install_completion",
            bool,
            typer.Option(
                "--install-completion",
                callback=_install,
                help="install completion for the shell dyno runs in (restart the shell after)",
                is_eager=True,
                expose_value=False,
            ),
        ),
    ]


def _print(text: str) -> None:
    """Print as a command does: a closed pipe reaches dyno.main (141, quietly), not click's exit 1."""
    from .app import Passed

    try:
        print(text, flush=True)
    except BrokenPipeError as exc:
        raise Passed(exc) from None


def _keyword(name: str, kind: Any, option: Any) -> inspect.Parameter:
    default = False if kind is bool else None
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, option]
    )


def _shell(text: str) -> str:
    if text not in SHELLS:
        raise typer.BadParameter(f"must be one of {', '.join(SHELLS)}, got {text!r}")
    return text


def _show(ctx: click.Context, param: click.Parameter, shell: Optional[str]) -> None:
    if shell and not ctx.resilient_parsing:
        from typer._completion_shared import get_completion_script

        _print(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell))
        raise typer.Exit()


def _install(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from typer._completion_shared import install

        shell, path = install(prog_name=PROG, complete_var=COMPLETE_VAR)
        print(f"{shell} completion installed in {path}; it takes effect in a new shell")
        raise typer.Exit()
