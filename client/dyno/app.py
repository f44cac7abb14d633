"""``dyno`` on typer: the command tables (:mod:`dyno.flags`, :mod:`dyno.commands`) as typer commands.

A command's module is imported only when the command runs, shows its own help or completes its options:
``dyno --help`` and completing ``dyno npu`` list the commands from :data:`dyno.commands.COMMANDS`. Each
flag becomes one keyword parameter of a synthesized signature, ``Annotated[T, typer.Option(...)]``,
parsed by the flag's own type (so a bad value reads as dyno says it); the global options are the
group's, and may be given again after a command's name, where they win. Help is plain text, laid out
from the tables: the docstring as written, every spelling of a flag with its metavar. Usage errors are
:class:`~dyno.exits.CliError` (exit 2), which :mod:`dyno.main` prints as ``dyno: message``.
"""

from __future__ import annotations

import inspect
import keyword
import sys
from argparse import Namespace
from typing import Annotated, Any, Callable, Dict, List, Optional, Sequence

import click
import typer
from click.core import ParameterSource
from click.shell_completion import CompletionItem
from typer.core import TyperCommand, TyperGroup

from .exits import EXIT_USAGE, CliError
from .flags import Command, Entry, Flag, Group, Listed, help_text, parse

_KEYWORD = inspect.Parameter.KEYWORD_ONLY
_CONTEXT: Dict[str, Any] = {"help_option_names": ["--help"], "max_content_width": 100}
_TYPER: Dict[str, Any] = {
    "rich_markup_mode": None,
    "add_completion": False,
    "pretty_exceptions_enable": False,
}


class Passed(BaseException):
    """What dyno handles itself, carried past typer, which turns Ctrl-C into an exit status 130 and a
    closed pipe into a silent exit 1 (:mod:`dyno.main` makes them SIGINT and SIGPIPE)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(original)
        self.original = original


# --- one flag, one parameter --------------------------------------------------------------------------


def parameter(flag: Flag) -> inspect.Parameter:
    """*flag* as a keyword parameter of a synthesized signature, typer's annotation on it."""
    common: Dict[str, Any] = {"help": help_text(flag), "show_default": False}
    if flag.positional:
        argument = typer.Argument(parser=_parser(flag), metavar=flag.name.upper(), **common)
        if flag.repeat:
            return _keyword(flag, Annotated[Optional[List[Any]], argument], None)
        return _keyword(
            flag, Annotated[Any, argument], flag.default if flag.optional else inspect.Parameter.empty
        )
    if flag.type is bool:
        return _keyword(flag, Annotated[bool, typer.Option(*flag.names, **common)], False)
    option = typer.Option(*flag.names, parser=_parser(flag), metavar=_metavar(flag), **common)
    if flag.repeat:
        return _keyword(flag, Annotated[List[Any], option], list(flag.default or ()))
    default = inspect.Parameter.empty if flag.required else flag.default
    return _keyword(flag, Annotated[Any, option], default)


def _keyword(flag: Flag, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(_name(flag.dest), _KEYWORD, default=default, annotation=annotation)


def _name(dest: str) -> str:
    """A parameter's name for *dest*: ``--from``'s is ``from_`` (a keyword cannot name a parameter)."""
    return dest + "_" if keyword.iskeyword(dest) else dest


def _dests(values: Dict[str, Any]) -> Dict[str, Any]:
    """The parsed values by each flag's ``dest`` again."""
    return {name[:-1] if keyword.iskeyword(name[:-1]) else name: value for name, value in values.items()}


def _parser(flag: Flag) -> Callable[[Any], Any]:
    def parse_text(text: Any) -> Any:
        if not isinstance(text, str):  # a default given as a value
            return text
        try:
            return parse(flag, text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return parse_text


def _metavar(flag: Flag) -> str:
    return f"[{flag.shown_metavar}]" if flag.bare else flag.shown_metavar


def _spellings(flag: Flag) -> str:
    """Every spelling of *flag*, each with its metavar: ``--pid N,N, --pids N,N``."""
    if flag.positional:
        return flag.name.upper()
    if flag.type is bool:
        return ", ".join(flag.names)
    return ", ".join(f"{name} {_metavar(flag)}" for name in flag.names)


# --- commands ---------------------------------------------------------------------------------------


class DynoCommand(TyperCommand):
    """One of dyno's commands: its help laid out from its table, msprof's optional-value switches."""

    flags: Sequence[Flag] = ()
    global_flags: Sequence[Flag] = ()  # the global options, also taken after the command's name

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(
            ctx.command_path, "[OPTIONS]" + "".join(_usage(f) for f in self.flags if f.positional)
        )

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        write_lines(self.help, formatter)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        positional = [f for f in self.flags if f.positional]
        options = [f for f in self.flags if not f.positional]
        for title, flags in (
            ("Arguments", positional),
            ("Options", options),
            ("Global options", self.global_flags),
        ):
            rows = [(_spellings(f), help_text(f)) for f in flags]
            if title == "Options":
                rows.append(("--help", "show this message and exit"))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows, col_max=36)

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        """msprof's ``--aicpu`` alone is ``--aicpu on`` (as argparse's ``nargs="?"``)."""
        alone = {name: f.bare for f in self.flags if f.bare for name in f.names}
        out: List[str] = []
        for i, arg in enumerate(args):
            if arg == "--":
                out += args[i:]
                break
            out.append(arg)
            following = args[i + 1] if i + 1 < len(args) else "-"
            if arg in alone and following.startswith("-"):
                out.append(alone[arg])
        rest: List[str] = super().parse_args(ctx, out)
        return rest


def _usage(positional: Flag) -> str:
    if positional.usage:
        return f" {positional.usage}"
    name = positional.name.upper()
    if positional.repeat:
        return f" [-- {name} ...]"
    return f" [{name}]" if positional.optional else f" {name}"


def write_lines(help: Optional[str], formatter: click.HelpFormatter) -> None:
    """A docstring's lines as written (click's write_text would rewrap them into paragraphs)."""
    if help:
        formatter.write_paragraph()
        with formatter.indentation():
            for line in inspect.cleandoc(help).splitlines():
                formatter.write(f"{'':>{formatter.current_indent}}{line}\n" if line else "\n")


def command(spec: Command, global_flags: Sequence[Flag]) -> DynoCommand:
    """*spec* as a click command (typer's) that calls ``spec.run`` with the global options (given before
    the command, or after it: they win) and the parsed flags."""
    own = {name for f in spec.flags for name in f.names}
    late = [g for g in global_flags if g.name not in own]
    parameters = [inspect.Parameter("ctx", _KEYWORD, annotation=typer.Context)]
    parameters += [parameter(f) for f in (*spec.flags, *late)]

    def callback(ctx: typer.Context, **values: Any) -> None:
        chosen = dict(ctx.obj or {})
        for g in late:
            value = values.pop(g.dest)
            if ctx.get_parameter_source(g.dest) is ParameterSource.COMMANDLINE:
                chosen[g.dest] = value
        try:
            ctx.meta["run"](ctx.command_path, spec, chosen, _dests(values))
        except (KeyboardInterrupt, EOFError, BrokenPipeError) as exc:
            raise Passed(exc) from None

    callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    app = typer.Typer(**_TYPER)
    app.command(spec.name, cls=DynoCommand, help=spec.help, context_settings=_CONTEXT)(callback)
    made = typer.main.get_command(app)
    assert isinstance(made, DynoCommand)  # one command and no callback: typer makes no group
    made.flags, made.global_flags = spec.flags, late
    return made


def parsed(spec: Command, argv: Sequence[str]) -> Namespace:
    """*argv* as the command *spec* parses it (each flag's value by its ``dest``), without running it:
    what another part sends "as ``dyno`` would for these flags" (``dyno respond``'s capture)."""
    made = command(spec, ())
    with made.make_context(spec.name, list(argv)) as ctx:
        return Namespace(**_dests(ctx.params))


# --- groups -----------------------------------------------------------------------------------------


class LazyGroup(TyperGroup):
    """A group whose commands are listed from a table, and imported only to run or show their help."""

    entries: Sequence[Entry] = ()
    global_flags: Sequence[Flag] = ()

    def list_commands(self, ctx: click.Context) -> List[str]:
        return [entry.name for entry in self.entries]

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        if cmd_name not in self.commands:
            entry = next((e for e in self.entries if e.name == cmd_name), None)
            if entry is None:
                return None
            self.commands[cmd_name] = self._made(entry.load() if isinstance(entry, Listed) else entry)
        return self.commands[cmd_name]

    def _made(self, entry: Any) -> click.Command:
        if isinstance(entry, Group):
            return group(entry.name, entry.help, entry.commands(), self.global_flags)
        return command(entry, self.global_flags)

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        write_lines(self.help, formatter)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing from the table: no command module imported."""
        rows = [(e.name, _summary(e)) for e in self.entries]
        with formatter.section("Commands"):
            formatter.write_dl(rows, col_max=36)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> List[CompletionItem]:
        """Command names from the table; an option (the word starts with '-') as click finds it."""
        if incomplete.startswith("-"):
            return list(super().shell_complete(ctx, incomplete))
        return [
            CompletionItem(e.name, help=_summary(e)) for e in self.entries if e.name.startswith(incomplete)
        ]


def _summary(entry: Entry) -> str:
    return entry.help.splitlines()[0] if entry.help else ""


def group(
    name: str, help: str, entries: Sequence[Entry], global_flags: Sequence[Flag], root: Any = None
) -> LazyGroup:
    """A group of *entries*; *root*: the top group's callback (the global options), else none."""
    app = typer.Typer(cls=LazyGroup, help=help, name=name, subcommand_metavar="COMMAND [ARGS]...", **_TYPER)
    app.callback(invoke_without_command=True, context_settings=_CONTEXT)(root or _missing_command)
    made = typer.main.get_command(app)
    assert isinstance(made, LazyGroup)
    made.entries, made.global_flags = entries, global_flags
    return made


def signed(function: Callable[..., None], parameters: Sequence[inspect.Parameter]) -> Callable[..., None]:
    """*function* behind a synthesized signature of *parameters* (typer reads a callback's type hints
    too: a wrapper keeps the function's own annotations out of them)."""

    def call(**values: Any) -> None:
        function(**values)

    call.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return call


def _missing_command(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        raise CliError(f"missing command\n\n{ctx.get_help()}", EXIT_USAGE)


# --- usage errors -----------------------------------------------------------------------------------


def usage_error(exc: click.ClickException) -> CliError:
    """A click error as dyno words it: the flag first, as dyno's other usage errors say it."""
    if isinstance(exc, click.NoSuchOption):
        message = f"No such option: {exc.option_name}"
        if exc.possibilities:
            message += f" (Possible options: {', '.join(sorted(exc.possibilities))})"
    elif isinstance(exc, click.MissingParameter) and exc.param is not None:
        message = f"{'/'.join(exc.param.opts)}: required"
    elif isinstance(exc, click.BadParameter) and exc.param is not None:
        message = f"{exc.param.opts[0]}: {exc.message}"
    else:
        message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    prog = ctx.command_path if ctx is not None else "dyno"
    return CliError(f"{message}\nTry '{prog} --help' for help.", EXIT_USAGE)


def run(build: Callable[[], click.Command], argv: Sequence[str]) -> None:
    """Parse *argv* and run the command it names; a usage error is a CliError, Ctrl-C and a closed pipe
    are raised as themselves."""
    try:
        exit_code = build().main(args=list(argv), prog_name="dyno", standalone_mode=False)
    except Passed as passed:
        raise passed.original from None
    except click.ClickException as exc:
        raise usage_error(exc) from None
    except click.exceptions.Exit as exc:  # --help, --version, --show-completion: done
        exit_code = exc.exit_code
    except click.Abort:  # click's own Ctrl-C at a prompt it shows (dyno shows none)
        raise KeyboardInterrupt from None
    if isinstance(exit_code, int) and exit_code:
        sys.exit(exit_code)
