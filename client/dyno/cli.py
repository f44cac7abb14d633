"""``dyno``'s command line as data: each flag declared once, and argparse parsers and requests built from it.

A :class:`Flag` says what a user types, where the value goes (a field of the gRPC request, or of the
:class:`~dyno.fleet.target.Target`), its type, default and help. A :class:`Command` is a name, its flags and
a ``run`` whose docstring is its help; a :class:`Group` holds subcommands (``dyno certs init``); a
:class:`Listed` stands for a command in its group's listing until it runs (its module unimported).
Standard library only, so that ``dyno --help`` and usage errors never load gRPC, protobuf or
cryptography: commands import those inside ``run``. For the same reason the records here are typed
NamedTuples, not frozen dataclasses: ``dataclasses`` imports ``inspect``, which alone would add a third
to the time ``dyno --help`` takes.
"""

from __future__ import annotations

import argparse
import functools
import os
import textwrap
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterable,
    List,
    NamedTuple,
    NoReturn,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from msmonitor_contract.vocabulary import FLAG_NAMES, split_list

from .exits import EXIT_USAGE, CliError
from .fleet.target import Target

if TYPE_CHECKING:
    from msmonitor_contract.rules import FieldError

Run = Callable[[Target, argparse.Namespace], None]
M = TypeVar("M")


class Flag(NamedTuple):
    """An option (``--log-file``) or an argument (``directory``, no dashes) and where its value goes.

    ``field`` is the request attribute the value fills (dotted into a nested message:
    ``targets.job_id``), or None for a flag ``run`` reads itself from the parsed arguments. ``type``
    parses the text (``bool``: a switch that takes no value); argparse passes a text ``default``
    through it too, so defaults are written as a user would type them.
    """

    name: str
    field: Optional[str]
    type: Callable[[str], Any] = str
    default: Any = None
    help: str = ""
    aliases: Tuple[str, ...] = ()
    required: bool = False
    # may be given several times; the value is the list (default: an empty one). A positional one takes
    # the remaining words, and after ``--`` words like options too: a command to run, with its own.
    repeat: bool = False
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    usage: str = ""  # a positional's words in the usage line, when they are not "NAME" or "-- NAME ..."
    optional: bool = False  # a positional that may be left out (its value is then ``default``)

    @property
    def dest(self) -> str:
        """The attribute of the parsed arguments that holds the value."""
        return self.name.lstrip("-").replace("-", "_")

    @property
    def positional(self) -> bool:
        return not self.name.startswith("-")


def field_flag(field: str, *args: Any, **kwargs: Any) -> Flag:
    """The flag that fills request *field*, named from ``vocabulary.FLAG_NAMES``, the table
    dynoproto.validate names it from in its errors (the rest as :class:`Flag` takes it)."""
    return Flag(FLAG_NAMES[field], field, *args, **kwargs)


class Command(NamedTuple):
    """A subcommand: its flags, and ``run``, whose docstring is its help (the first line, its summary).

    ``across`` runs it on every host of ``--hosts``, ``--hostfile`` or ``--slurm-job`` (dyno.fleet.fanout);
    a command without one works with one daemon, or none.
    """

    name: str
    run: Run
    flags: Tuple[Flag, ...] = ()
    across: Optional[Run] = None

    @property
    def help(self) -> str:
        # inspect.cleandoc would do, but importing inspect costs more than the rest of `dyno --help`.
        first, _, rest = (self.run.__doc__ or "").partition("\n")
        return f"{first}\n{textwrap.dedent(rest)}".strip()


class Group(NamedTuple):
    """A command whose first argument names one of its subcommands (``dyno certs init``).

    ``commands`` is called only when the group runs, so a group can leave heavy imports to its users.
    """

    name: str
    help: str
    commands: Callable[[], Sequence[Command]]


class Listed(NamedTuple):
    """A command as its group's help lists it, without importing it: its name, its summary (the first
    line of its help, as the command's ``run`` docstring says it) and the module whose ``COMMAND`` it is.

    The module is imported only to run the command or show its own help: a group's ``--help`` and its
    usage errors import none of them.
    """

    name: str
    help: str
    module: str

    def load(self) -> Union[Command, Group]:
        # __import__, not importlib.import_module: importing importlib costs a tenth of `dyno --help`.
        entry: Union[Command, Group] = __import__(self.module, fromlist=["COMMAND"]).COMMAND
        return entry


Entry = Union[Command, Group, Listed]


# --- value types: each parses one flag's text; a bad value is a usage error naming the flag ------------


def int_list(text: str) -> List[int]:
    """``1,2,3`` as integers that fit a pid or rank (int32)."""
    try:
        values = [int(v) for v in split_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    too_big = [v for v in values if not -(2**31) <= v < 2**31]
    if too_big:
        raise argparse.ArgumentTypeError(f"{too_big[0]} is not a pid or rank (at most {2**31 - 1})")
    return values


def pid_list(text: str) -> List[int]:
    """:func:`int_list` where msMonitor's ``0`` (or nothing) means every process: no pid listed."""
    pids = int_list(text)
    return [] if pids == [0] else pids


def true_false(text: str) -> bool:
    """msMonitor's spelled-out booleans (``--data-simplification false``)."""
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"must be true or false, got {text!r}")
    return text == "true"


def on_off(text: str) -> bool:
    """msprof's switches: ``--aicpu=on`` or ``--aicpu=off``, and ``--aicpu`` alone for on."""
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"must be on or off, got {text!r}")
    return text == "on"


def directory(text: str) -> str:
    """A folder on this host (named DIR in the help)."""
    return text


# By the type's name: keyed by pathlib.Path itself, this would import pathlib, which only certs needs.
_METAVARS = {
    "int": "INT",
    "float": "FLOAT",
    "Path": "PATH",
    "split_list": "A,B",
    "int_list": "N,N",
    "pid_list": "N,N",
    "true_false": "true|false",
    "on_off": "on|off",
    "directory": "DIR",
}


# --- flags more than one command takes -------------------------------------------------------------

JOB_ID = Flag("--job-id", "targets.job_id", int, 0, "only this job's processes (0: every job)")
TARGETING = (
    JOB_ID,
    Flag(
        "--pids", "targets.pids", pid_list, "0", "comma-separated pids; a launcher's pid selects its workers"
    ),
    field_flag("targets.ranks", int_list, None, "comma-separated ranks, e.g. 0,1"),
    Flag(
        "--process-limit",
        "targets.process_limit",
        int,
        0,
        "at most this many processes (default 0: every matched one; dynolog's is 3)",
    ),
)
WAIT_TIMEOUT = Flag("--wait-timeout", None, float, 600.0, "seconds --wait waits at most")
COLLECT = Flag(
    "--collect",
    None,
    directory,
    None,
    "fetch the trace's files from every host into DIR here (after --wait: trace commands need it), one "
    "trace per rank as HolisticTraceAnalysis reads a job: DIR/<host>_rank<R>_pid<P>.pt.trace.json; "
    "never overwrites",
)
SYNC = Flag(
    "--sync",
    None,
    bool,
    False,
    "with --hosts: start a time-based trace at one instant on every host (sets --profile-start-time "
    "from the round trips to the hosts; the answer states it)",
)


# --- from flags to requests ---------------------------------------------------------------------------


def fill(message: M, flags: Sequence[Flag], args: argparse.Namespace) -> M:
    """*message* with each flag's field set from *args*; a flag that has no value leaves its field unset."""
    for flag in flags:
        value = getattr(args, flag.dest)
        if flag.field is None or value is None:
            continue
        *parents, name = flag.field.split(".")
        owner = functools.reduce(getattr, parents, message)
        try:
            if isinstance(value, list):
                getattr(owner, name).extend(value)  # a repeated field cannot be assigned
            else:
                setattr(owner, name, value)
        except (TypeError, ValueError) as exc:  # beyond what the field holds, e.g. an int32
            raise CliError(f"{flag.name}: {exc}", EXIT_USAGE) from None
    return message


def check_fields(errors: Sequence[FieldError]) -> None:
    """A request's validation errors (each naming its flag) as one usage error."""
    if errors:
        raise CliError("; ".join(str(e) for e in errors), EXIT_USAGE)


# --- parsers ----------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse on dyno's one error path: a usage error is a :class:`CliError` (exit 2)."""

    def error(self, message: str) -> NoReturn:
        # argparse says "argument --flag: problem"; dyno's other usage errors say "--flag: problem".
        problem = message.removeprefix("argument ")
        raise CliError(f"{problem}\nTry '{self.prog} --help' for help.", EXIT_USAGE)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help as written in the docstrings (example lines stay lines), under ``Usage:``."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=36, width=_columns())

    def add_usage(
        self,
        usage: Optional[str],
        actions: Iterable[argparse.Action],
        groups: Iterable[Any],
        prefix: Optional[str] = None,
    ) -> None:
        super().add_usage(usage, actions, groups, "Usage: ")


def command_parser(prog: str, command: Command, global_flags: Sequence[Flag] = ()) -> Parser:
    """The command's flags, and the global ones a user may also type after the command's name
    (``dyno dynamic --pid 1 --json``); a flag of the command's own takes precedence over a global one."""
    arguments = "".join(_usage(flag) for flag in command.flags if flag.positional)
    parser = _parser(prog, command.help, f"%(prog)s [OPTIONS]{arguments}")
    _add_flags(parser, command.flags)
    own = {name for flag in command.flags for name in (flag.name, *flag.aliases)}
    _add_flags(parser, [f for f in global_flags if f.name not in own], "Global options", given_only=True)
    return parser


def group_parser(prog: str, description: str, entries: Sequence[Entry], flags: Sequence[Flag] = ()) -> Parser:
    """Options of the group itself, then a subcommand's name and everything after it, for that one."""
    width = max(len(entry.name) for entry in entries)
    listing = "\n".join(
        textwrap.fill(
            entry.help.splitlines()[0],
            _columns(),
            initial_indent=f"  {entry.name.ljust(width)}  ",
            subsequent_indent=" " * (width + 4),
        )
        for entry in entries
    )
    parser = _parser(prog, description, "%(prog)s [OPTIONS] COMMAND [ARGS]...", f"Commands:\n{listing}")
    _add_flags(parser, flags)
    parser.add_argument("command", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def dispatch(
    parser: Parser,
    entries: Sequence[Entry],
    args: argparse.Namespace,
    target: Target,
    global_flags: Sequence[Flag] = (),
) -> None:
    """Run the subcommand a group's parsed *args* name, with the arguments that follow it; *global_flags*
    (fields of the :class:`Target`) given among those arguments override the ones given before."""
    if args.command is None:
        raise CliError(f"missing command\n\n{parser.format_help()}", EXIT_USAGE)
    entry = next((e for e in entries if e.name == args.command), None)
    if entry is None:
        parser.error(f"No such command '{args.command}'.")
    if isinstance(entry, Listed):
        entry = entry.load()
    prog = f"{parser.prog} {entry.name}"
    if isinstance(entry, Group):
        commands = entry.commands()
        sub = group_parser(prog, entry.help, commands)
        dispatch(sub, commands, sub.parse_args(args.args), target, global_flags)
    else:
        parsed = command_parser(prog, entry, global_flags).parse_args(args.args)
        given = {
            f.field: getattr(parsed, f.dest) for f in global_flags if f.field and hasattr(parsed, f.dest)
        }
        _run(prog, entry, target._replace(**given), parsed)


def _run(prog: str, command: Command, target: Target, args: argparse.Namespace) -> None:
    if not target.fans_out:
        command.run(target, args)
    elif command.across is not None:
        command.across(target, args)
    else:
        raise CliError(
            f"'{prog}' works with one daemon (or none): --hosts, --hostfile and --slurm-job do not apply",
            EXIT_USAGE,
        )


def _parser(prog: str, description: str, usage: str, epilog: Optional[str] = None) -> Parser:
    return Parser(
        prog=prog,
        usage=usage,
        description=description,
        epilog=epilog,
        formatter_class=_Formatter,
        add_help=False,  # --help is added to the Options section below; there is no -h
        allow_abbrev=False,  # a prefix of a flag is a typo, not that flag
    )


def _add_flags(
    parser: Parser, flags: Sequence[Flag], title: str = "Options", given_only: bool = False
) -> None:
    """*given_only*: the global flags again, after a command's name: one not typed there leaves no
    attribute, so it does not undo the value typed before the name."""
    arguments = parser.add_argument_group("Arguments") if any(f.positional for f in flags) else None
    options = parser.add_argument_group(title)
    for flag in flags:
        if arguments is not None and flag.positional:
            arguments.add_argument(
                flag.dest,
                metavar=flag.name.upper(),
                type=_parse(flag),
                nargs="*" if flag.repeat else ("?" if flag.optional else None),
                default=flag.default,
                help=_help(flag),
            )
        elif flag.type is bool:
            options.add_argument(
                flag.name,
                *flag.aliases,
                dest=flag.dest,
                action="store_true",
                default=argparse.SUPPRESS if given_only else False,
                help=_help(flag),
            )
        else:
            options.add_argument(
                flag.name,
                *flag.aliases,
                dest=flag.dest,
                type=_parse(flag),
                action="append" if flag.repeat else "store",
                # append extends the default: each parser gets a new list
                default=argparse.SUPPRESS
                if given_only
                else (list(flag.default or ()) if flag.repeat else flag.default),
                required=flag.required,
                metavar=_metavar(flag),
                help=_help(flag),
                # msprof's switches: the value is optional (argparse passes "on" through on_off)
                **({"nargs": "?", "const": "on"} if flag.type is on_off else {}),
            )
    if not given_only:
        options.add_argument("--help", action="help", help="show this message and exit")


def _parse(flag: Flag) -> Callable[[str], Any]:
    """The flag's type, held to its range, with a message that says what was expected."""

    def parse(text: str) -> Any:
        try:
            value = flag.type(text)
        except ValueError:  # the type's own ArgumentTypeError, with its message, passes through
            expected = _metavar(flag)
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        too_small = flag.minimum is not None and value < flag.minimum
        if too_small or (flag.maximum is not None and value > flag.maximum):
            raise argparse.ArgumentTypeError(f"{text} is not in the range {_range(flag)}")
        return value

    return parse


def _usage(positional: Flag) -> str:
    if positional.usage:
        return f" {positional.usage}"
    name = positional.name.upper()
    if positional.repeat:
        return f" [-- {name} ...]"
    return f" [{name}]" if positional.optional else f" {name}"


def _columns() -> int:
    """The width argparse would wrap help to (the terminal's, less 2), found as shutil finds it but
    without importing shutil, which imports bz2 and lzma: a tenth of what `dyno --help` costs."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size().columns  # of stdout
        except OSError:  # not a terminal: a pipe, a file
            columns = 0
    return columns - 2 if columns > 2 else 78  # 0: a terminal not sized yet (a new pty), as for shutil


def _metavar(flag: Flag) -> str:
    return _METAVARS.get(getattr(flag.type, "__name__", ""), "TEXT")


def _range(flag: Flag) -> str:
    if flag.maximum is None:
        return f"x>={flag.minimum}"
    if flag.minimum is None:
        return f"x<={flag.maximum}"
    return f"{flag.minimum}<=x<={flag.maximum}"


def _help(flag: Flag) -> str:
    notes = []
    if flag.required:
        notes.append("required")
    elif flag.default not in (None, "", ()) and flag.default is not False:
        notes.append(f"default: {flag.default}")
    if flag.minimum is not None or flag.maximum is not None:
        notes.append(_range(flag))
    if flag.repeat and not flag.positional:
        notes.append("repeatable")
    text = f"{flag.help}  [{'; '.join(notes)}]" if notes else flag.help
    return text.replace("%", "%%")  # argparse %-formats help texts
