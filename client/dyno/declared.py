"""A command kind's flags from its declaration (:mod:`msmonitor_contract.kinds`), field by field, and its
request built back from the parsed values: a field's flag, default, help and checks exist once, in the
declaration. The targeting flags every command that selects processes takes are here too."""

from __future__ import annotations

from argparse import Namespace
from typing import Any, Dict, Iterable, Sequence, Tuple

from msmonitor_contract.schema import Field, Message
from msmonitor_contract.targets import TARGETS
from msmonitor_contract.values import Value

from .flags import Flag


def declared(
    message: Message, skip: Iterable[str] = (), prefix: str = "", **renamed: Flag
) -> Tuple[Flag, ...]:
    """A flag for each field of *message* dyno has one for (nested messages' too, ``targets.ranks``), but
    those whose path is in *skip* (or under it); *renamed*: a field's flag as this command spells it (a
    path with ``__`` for its dots: ``targets__pids=Flag("--pid", ...)``). *prefix*: the message's path in
    the request."""
    skipped = set(skip)
    own = {path.replace("__", "."): flag for path, flag in renamed.items()}
    return tuple(
        own.get(path) or _flag(path, f)
        for path, f in message.options(prefix)
        if path not in skipped and not any(path.startswith(s + ".") for s in skipped)
    )


def _flag(path: str, f: Field) -> Flag:
    value = f.type if isinstance(f.type, Value) and f.parse is None else None  # as its type reads
    switch = value is not None and value.switch
    metavar = value.metavar if value is not None else ""
    return Flag(
        f.flag_name,
        path,
        bool if switch else f.reads,
        None if switch else f.default,
        f.help,
        f.aliases,
        required=f.required,
        minimum=f.minimum,
        maximum=f.maximum,
        metavar="" if metavar in ("TEXT", "BOOL") else metavar,
        bare=(value.bare if value is not None else None) or "",
    )


def unset(flags: Tuple[Flag, ...], *names: str) -> Tuple[Flag, ...]:
    """*flags* with those named in *names* defaulting to None, "not given", so that a typed value equal to
    the request's default is still seen as typed (``--iterations 0``: tracing.start refuses it)."""
    return tuple(f._replace(default=None) if f.name in names else f for f in flags)


def request(message: Message, flags: Sequence[Flag], args: Namespace, **values: Any) -> Any:
    """*message*'s model from the values of *flags* that fill its fields (a flag not given, None, leaves
    its field to the model's default), and *values* given by path (``targets__pids``)."""
    fields: Dict[str, Any] = {}
    given = {f.field: getattr(args, f.dest) for f in flags if f.field is not None}
    given.update({path.replace("__", "."): value for path, value in values.items()})
    for path, value in given.items():
        if value is None:
            continue
        *parents, name = path.split(".")
        owner = fields
        for parent in parents:
            owner = owner.setdefault(parent, {})
        owner[name] = value
    return message.build(fields)


TARGETING = declared(TARGETS, prefix="targets.")
JOB_ID = TARGETING[0]
