"""A message's fields, each declared once: the language of the command kinds' declarations (:mod:`.kinds`).

A :class:`Field` is a name (the proto field's and the model's), a type, the default ``dyno`` sends
when its flag is not given, the help a user reads, the flag they type (and older spellings), the check
its values must pass, and its config-text key. A :class:`Message` is fields in the order of their
config text, with the keys no field holds (derived from others) in their places, and the checks that
span fields. From a message derive:

- its model (:attr:`Message.model`): a frozen dataclass whose fields are the proto message's, by
  name, each defaulting to what the wire holds when it is not given (proto3's zero);
- its checks (:meth:`Message.check`), which name each field by its flag;
- its key table (:attr:`Message.keys`) and a value's keys (:meth:`Message.by_key`), and the fields a
  config text gives (:meth:`Message.from_text`);
- dyno's options (:meth:`Message.options`).

Standard library only: the plugin reads the keys, the daemon builds and checks the model, ``dyno``
makes its options from the same declaration.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import configtext
from .configtext import Codec, ConfigTextError, Key
from .rules import Check, FieldError
from .values import (
    Value,
)


class _FromField:
    def __repr__(self) -> str:
        return "FROM_FIELD"


FROM_FIELD: Any = _FromField()


@dataclass(frozen=True)
class KeyOf:
    """A field's config-text key, where it is more than its name: the reader's default when it is not
    the field's (``FROM_FIELD``), whether msMonitor's reader requires it, a codec of its own, and
    whether an empty value is written as the default (msMonitor's dyno fills those in)."""

    name: str
    default: Any = FROM_FIELD
    required: bool = False
    codec: Optional[Codec] = None
    empty_is_default: bool = False


@dataclass(frozen=True)
class Field:
    """One field of a message, as every part of the project sees it."""

    name: str
    type: Union[Value, Message]
    help: str = ""
    default: Any = None  # dyno's when the flag is not given, as a user types it (None: the zero)
    key: Union[str, KeyOf, None] = None  # its KEY in the config text; None: it has none
    check: Optional[Check] = None
    flag: str = ""  # "": --the-name-with-dashes
    aliases: Tuple[str, ...] = ()  # other spellings dyno accepts (msMonitor's, dynolog's)
    parse: Optional[Callable[[str], Any]] = None  # a flag's text -> value, when not the type's
    required: bool = False  # dyno requires its flag
    optional: bool = False  # None when not given (proto3 ``optional``, an absent message)
    legacy: bool = True  # its key goes to the C++ daemons' plugins too (False: this project's own)
    option: bool = True  # dyno has a flag for it
    minimum: Optional[float] = None  # the flag's range, checked as it is parsed
    maximum: Optional[float] = None

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def reads(self) -> Callable[[str], Any]:
        """How a flag's text reads as this field's value."""
        if self.parse is not None:
            return self.parse
        if isinstance(self.type, Message):
            raise TypeError(f"{self.name}: a message field's flag needs its own parse")
        return self.type.parse

    def default_value(self) -> Any:
        """dyno's default, read as typed (a default given as a user types it goes through the flag's
        parse); the zero when there is none."""
        if self.default is None:
            return None if self.optional else self.zero
        typed_text = isinstance(self.type, Value) and self.type.python is str
        if isinstance(self.default, str) and not typed_text:
            return self.reads(self.default)
        return self.default

    @property
    def zero(self) -> Any:
        if self.optional:
            return None
        if isinstance(self.type, Message):
            return self.type.model()
        return self.type.zero

    def config_key(self) -> Key:
        spec = self.key if isinstance(self.key, KeyOf) else KeyOf(str(self.key))
        if isinstance(self.type, Message):
            raise TypeError(f"{self.name}: a message field has no config-text key")
        default = spec.default
        if default is FROM_FIELD:
            value = self.default_value()
            default = value if value is not None else ""
        if isinstance(default, tuple):
            default = list(default)
        return Key(spec.name, spec.codec or self.type.codec, default, spec.required)

    @property
    def empty_is_default(self) -> bool:
        return isinstance(self.key, KeyOf) and self.key.empty_is_default


# A check that spans fields: the message's value -> what is wrong, each error naming one field.
MessageCheck = Callable[[Any], List[FieldError]]


class Message:
    """A message's fields and derived keys, in config-text order, and the checks that span fields."""

    def __init__(
        self,
        name: str,
        entries: Sequence[Union[Field, Key]],
        checks: Sequence[MessageCheck] = (),
        base: type = object,
    ) -> None:
        self.name = name  # the proto message's
        self.entries = tuple(entries)
        self.fields = tuple(e for e in self.entries if isinstance(e, Field))
        self.checks = tuple(checks)
        self._base = base
        self._by_name = {f.name: f for f in self.fields}
        self._model: Optional[type] = None

    def __repr__(self) -> str:
        return f"Message({self.name})"

    def field(self, name: str) -> Field:
        return self._by_name[name]

    # --- the model -------------------------------------------------------------------------------

    @property
    def model(self) -> Any:
        """The message's frozen dataclass, named as the proto message (made once, when first asked)."""
        if self._model is None:
            self._model = dataclasses.make_dataclass(
                self.name,
                [(f.name, _annotation(f), _default(f)) for f in self.fields],
                bases=(self._base,),
                frozen=True,
                namespace={"__module__": self._base.__module__ if self._base is not object else __name__},
            )
        return self._model

    def build(self, values: Mapping[str, Any]) -> Any:
        """The model from a mapping of its fields (JSON, what a wire gave): lists become tuples, nested
        messages are built the same way, absent (or None) fields keep their defaults."""
        kwargs: Dict[str, Any] = {}
        for f in self.fields:
            value = values.get(f.name)
            if value is None:
                continue
            if isinstance(f.type, Message):
                value = value if isinstance(value, f.type.model) else f.type.build(value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
        return self.model(**kwargs)

    # --- checks ----------------------------------------------------------------------------------

    def check(self, value: Any) -> List[FieldError]:
        """Everything wrong with *value* (the model, or anything with its fields by name), each error
        naming its flag."""
        return [dataclasses.replace(e, flag=self.flag(e.field)) for e in self._errors(value, "")]

    def _errors(self, value: Any, prefix: str) -> List[FieldError]:
        errors: List[FieldError] = []
        for f in self.fields:
            if f.optional and not given(value, f.name):
                continue
            item = getattr(value, f.name)
            if isinstance(f.type, Message):
                errors += f.type._errors(item, f"{prefix}{f.name}.")
            if f.check is not None:
                errors += f.check(prefix + f.name, item)
        for check in self.checks:
            errors += [dataclasses.replace(e, field=prefix + e.field) for e in check(value)]
        return errors

    def flag(self, path: str) -> str:
        """The flag that sets the field at *path* (``targets.ranks``: ``--rank-list``)."""
        head, _, rest = path.partition(".")
        f = self._by_name.get(head)
        if f is None:
            return "--" + path.rpartition(".")[2].replace("_", "-")
        if rest and isinstance(f.type, Message):
            return f.type.flag(rest)
        return f.flag_name

    # --- dyno's options --------------------------------------------------------------------------

    def options(self, prefix: str = "") -> Iterator[Tuple[str, Field]]:
        """(path, field) of every field dyno has a flag for, nested messages' included, in order."""
        for f in self.fields:
            if isinstance(f.type, Message) and f.parse is None:
                yield from f.type.options(f"{prefix}{f.name}.")
            elif f.option:
                yield prefix + f.name, f

    # --- config text -----------------------------------------------------------------------------

    @property
    def keys(self) -> configtext.Table:
        """The key table: every key, in the order the text writes them (a nested message's in its place)."""
        table: List[Key] = []
        for e in self.entries:
            if isinstance(e, Key):
                table.append(e)
            elif isinstance(e.type, Message):
                table += e.type.keys
            elif e.key is not None:
                table.append(e.config_key())
        return tuple(table)

    def keyed(self, legacy: bool = False, prefix: str = "") -> Iterator[Tuple[str, Field, Key]]:
        """(path, field, its key) of every field that has one, nested messages' included; *legacy*: only
        those the C++ daemons' plugins read."""
        for f in self.fields:
            if isinstance(f.type, Message):
                yield from f.type.keyed(legacy, f"{prefix}{f.name}.")
            elif f.key is not None and (f.legacy or not legacy):
                yield prefix + f.name, f, f.config_key()

    def by_key(self, value: Any, legacy: bool = False) -> Dict[str, Any]:
        """*value*'s keyed fields under their keys; an empty one whose key says so as the key's default."""
        out: Dict[str, Any] = {}
        for path, f, key in self.keyed(legacy):
            item = _at(value, path)
            if f.empty_is_default and item in ("", 0, (), None):
                item = key.default
            out[key.name] = list(item) if isinstance(item, tuple) else item
        return out

    def from_text(self, text: str) -> Dict[str, Any]:
        """The fields *text* gives (nested messages' as nested mappings), typed by their keys and then as
        the field holds them; a key absent, empty or msMonitor's ``None`` is not given. Raises
        ConfigTextError naming a bad value."""
        given = {k: v for k, v in configtext.parse(text).items() if v not in ("", "None")}
        found = [(path, f, key) for path, f, key in self.keyed() if key.name in given]
        typed = configtext.read(tuple(key for _, _, key in found), given)
        fields: Dict[str, Any] = {}
        for path, f, key in found:
            *parents, name = path.split(".")
            owner = fields
            for parent in parents:
                owner = owner.setdefault(parent, {})
            owner[name] = _as_field(f, key.name, typed[key.name])
        return fields


def _at(value: Any, path: str) -> Any:
    for name in path.split("."):
        value = getattr(value, name)
    return value


def given(value: Any, name: str) -> bool:
    """Whether an optional field is set: None in a model, not present in a protobuf message (the
    checks read either by field name)."""
    has_field = getattr(value, "HasField", None)
    if has_field is not None:
        return bool(has_field(name))
    return getattr(value, name) is not None


def _as_field(f: Field, key: str, value: Any) -> Any:
    """A key's value as its field holds it, where the key's codec reads text (an optional number)."""
    python = f.type.python if isinstance(f.type, Value) else None
    if python is float and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ConfigTextError(f"{key}={value} is not a number") from None
    return value


def _annotation(f: Field) -> Any:
    python = f.type.model if isinstance(f.type, Message) else f.type.python
    return Optional[python] if f.optional else python


def _default(f: Field) -> Any:
    if f.optional:
        return None
    if isinstance(f.type, Message):
        return dataclasses.field(default_factory=f.type.model)
    return f.type.zero


def numbers_of(values: Sequence[Any], key: str) -> Tuple[int, ...]:
    """A key's comma list as integers (PROFILE_RANK_LIST); ConfigTextError names the key."""
    try:
        return tuple(int(v) for v in values)
    except ValueError:
        raise ConfigTextError(f"{key}={','.join(map(str, values))} is not a number") from None


# A kind's adjustment of the keys its fields give (keys derived from others, keys a mode leaves out):
# (the request, its fields' values by key) -> the values the text holds.
Shape = Callable[[Any, Dict[str, Any]], Dict[str, Any]]
# A kind's reading of what its text says beyond its fields' keys: (the text's raw values, the fields
# read so far, targets included) -> the fields.
Unshape = Callable[[Mapping[str, str], Dict[str, Any]], Dict[str, Any]]


@dataclass(frozen=True)
class Usage:
    """Where a kind is used beyond its request's fields: the ``dyno`` command that sends it (its command
    kind's name when not given), the C++ daemons that take it over the legacy wire, the field that names
    its output folder (held to ``--trace-root``), and how its config text is shaped beyond its fields'
    keys (*shape* writing it, *unshape* reading it)."""

    dyno: str = ""
    legacy: Sequence[str] = ()
    output_field: str = "log_file"
    shape: Optional[Shape] = None
    unshape: Optional[Unshape] = None


class Kind(Message):
    """A command kind: its vocabulary's *command*, the *rpc* that sends it, its request *message*, and
    its *usage* beyond the request's fields."""

    def __init__(self, command: Any, rpc: str, message: Message, usage: Usage = Usage()) -> None:
        super().__init__(message.name, message.entries, message.checks)
        self.command = command  # its vocabulary.CommandKind
        self.dyno = usage.dyno or command.value
        self.rpc = rpc
        self.legacy = tuple(usage.legacy)  # the C++ daemons (vocabulary.MSMONITOR_DAEMON, ...) that take it
        self._shape = usage.shape
        self._unshape = usage.unshape
        self.output_field = usage.output_field

    def __repr__(self) -> str:
        return f"Kind({self.command.value})"

    def render(self, request: Any, legacy: bool = False) -> str:
        """The config text of *request*; *legacy*: as the C++ daemons' plugins read it (without this
        project's own keys)."""
        values = self.by_key(request, legacy)
        if self._shape is not None:
            values = self._shape(request, values)
        return configtext.render(self.keys, values)

    def read(self, text: str, targets: Any) -> Any:
        """The request a client sent as config text, for *targets*. Raises ConfigTextError naming a bad
        value."""
        fields: Dict[str, Any] = {**self.from_text(text), "targets": targets}
        if self._unshape is not None:
            fields = self._unshape(configtext.parse(text), fields)
        return self.build(fields)
