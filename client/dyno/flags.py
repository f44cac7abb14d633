"""``dyno``'s command line as data: each command is a name, its flags and a ``run`` whose docstring is
its help; each flag says what a user types, where its value goes, its type, default and help.

A command kind's flags are not written here: they come from the kind's declaration, field by field
(:mod:`dyno.declared`). :mod:`dyno.app` makes the typer commands from these tables; nothing here imports
typer, gRPC or a declaration, so ``dyno --help`` loads none of them.
"""

from __future__ import annotations

from argparse import Namespace
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from .exits import EXIT_USAGE, CliError
from .fleet.target import Target

if TYPE_CHECKING:
    from msmonitor_contract.rules import FieldError

Run = Callable[[Target, Namespace], None]


class Flag(NamedTuple):
    """An option (``--log-file``) or an argument (``directory``, no dashes) and where its value goes.

    ``field`` is the request field the value fills (dotted into a nested message: ``targets.job_id``),
    or a field of the :class:`~dyno.fleet.target.Target` for the global options, or None for a flag
    ``run`` reads itself from the parsed arguments. ``type`` parses the text (``bool``: a switch that
    takes no value); a text ``default`` goes through it too, so defaults are written as a user types them.
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
    metavar: str = ""  # "": from the type
    bare: str = ""  # what the flag given alone stands for (msprof's ``--aicpu`` is ``--aicpu on``)

    @property
    def dest(self) -> str:
        """The attribute of the parsed arguments that holds the value."""
        return self.name.lstrip("-").replace("-", "_")

    @property
    def positional(self) -> bool:
        return not self.name.startswith("-")

    @property
    def names(self) -> Tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def shown_metavar(self) -> str:
        return self.metavar or _METAVARS.get(getattr(self.type, "__name__", ""), "TEXT")


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
        first, _, rest = (self.run.__doc__ or "").partition("\n")
        return f"{first}\n{_dedent(rest)}".strip()


class Group(NamedTuple):
    """A command whose first argument names one of its subcommands (``dyno certs init``); ``commands`` is
    called only when the group runs, so a group can leave heavy imports to its users."""

    name: str
    help: str
    commands: Callable[[], Sequence[Command]]


class Listed(NamedTuple):
    """A command as its group's help lists it, without importing it: its name, its summary (the first
    line of its help) and the module whose ``COMMAND`` it is, imported only to run the command or show
    its own help."""

    name: str
    help: str
    module: str

    def load(self) -> Union[Command, Group]:
        entry: Union[Command, Group] = __import__(self.module, fromlist=["COMMAND"]).COMMAND
        return entry


Entry = Union[Command, Group, Listed]


def _dedent(text: str) -> str:
    lines = text.splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return "\n".join(line[cut:] for line in lines)


# --- value types: each parses one flag's text; a bad value is a usage error naming the flag ------------


def directory(text: str) -> str:
    """A folder on this host (named DIR in the help)."""
    return text


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


def parse(flag: Flag, text: str) -> Any:
    """*text* as *flag*'s value, held to its range; ValueError says what was expected."""
    try:
        value = flag.type(text)
    except ValueError as exc:
        raise _flag_error(exc, f"expected {flag.shown_metavar}, got {text!r}") from None
    low, high = flag.minimum, flag.maximum
    if (low is not None and value < low) or (high is not None and value > high):
        raise _flag_error(None, f"{text} is not in the range {range_text(flag)}")
    return value


def _flag_error(error: Optional[ValueError], otherwise: str) -> ValueError:
    """A type's own FlagValueError as it is (its reason), any other as *otherwise*. The contract's value
    types are loaded here, on an error, not by every ``dyno --help``."""
    from msmonitor_contract.values import FlagValueError

    return error if isinstance(error, FlagValueError) else FlagValueError(otherwise)


def range_text(flag: Flag) -> str:
    if flag.maximum is None:
        return f"x>={flag.minimum}"
    if flag.minimum is None:
        return f"x<={flag.maximum}"
    return f"{flag.minimum}<=x<={flag.maximum}"


def help_text(flag: Flag) -> str:
    notes = []
    if flag.required:
        notes.append("required")
    elif flag.default not in (None, "", ()) and flag.default is not False:
        notes.append(f"default: {flag.default}")
    if flag.minimum is not None or flag.maximum is not None:
        notes.append(range_text(flag))
    if flag.repeat and not flag.positional:
        notes.append("repeatable")
    return f"{flag.help}  [{'; '.join(notes)}]" if notes else flag.help


def check_fields(errors: Sequence[FieldError]) -> None:
    """A request's errors (each naming its flag) as one usage error."""
    if errors:
        raise CliError("; ".join(str(e) for e in errors), EXIT_USAGE)


# --- flags more than one command takes -------------------------------------------------------------

WAIT = Flag("--wait", None, bool, False, "wait until every triggered process finished")
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
