"""The ``KEY=VALUE`` config text of every command: the one codec of its keys and values.

Each command kind's key table lives in its module (:mod:`msmonitor_plugin.kinds`). The daemon renders a
command with :func:`render` and the plugin reads it back with :func:`parse` and :func:`read`, both
through the same table, so a key's spelling, type and default exist once. nputrace and npu-monitor keys
follow msMonitor's ``dyno`` exactly (torch_npu and MindSpore read the same text); gputrace keys follow
dynolog's ``dyno`` for stock Kineto.

One rule for every reader: lines are trimmed, blank lines and ``#`` comments are skipped, and a line
without ``=`` is an error naming it.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Tuple

from . import vocabulary as v


class ConfigTextError(ValueError):
    """Config text that cannot be read; the message names the line or the key."""


@dataclass(frozen=True)
class Codec:
    """How a value of one type is written into config text, and read back."""

    write: Callable[[Any], str]
    read: Callable[[str], Any]


def _read_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError("true or false")
    return lowered == "true"


def _read_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError("an integer") from None


def _read_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError("a number") from None


TEXT = Codec(str, str)
OPTIONAL_TEXT = Codec(lambda value: str(value) if value not in ("", None) else "None", lambda t: t)
BOOL = Codec(lambda value: "true" if value else "false", _read_bool)
INT = Codec(lambda value: str(int(value)), _read_int)


def _write_float(value: Any) -> str:
    """Positional, as msMonitor's dyno writes a float: its readers (and ours) take digits, '.' and '-'
    only, so repr's 1e-05 would be refused. The digits of repr keep the round trip exact."""
    number = float(value)
    return format(decimal.Decimal(repr(number)), "f") if math.isfinite(number) else repr(number)


FLOAT = Codec(_write_float, _read_float)
# msMonitor writes an empty list as None; every reader treats None as empty.
LIST = Codec(lambda value: ",".join(str(item) for item in value) or "None", v.split_list)


@dataclass(frozen=True)
class Key:
    name: str
    codec: Codec
    default: Any = ""
    required: bool = False  # msMonitor's reader refuses a command without it


Table = Tuple[Key, ...]
# A command's fields that are keys as they are: (the field's name, the key's).
FieldKeys = Tuple[Tuple[str, str], ...]

# Appended by the daemon to every trace command; Kineto copies it into the trace.
TRACE_ID_KEY = "REQUEST_TRACE_ID"


def render(table: Table, values: Mapping[str, Any]) -> str:
    """The text of *values* (by key name), in the table's order; keys not in *values* are left out."""
    unknown = set(values) - {key.name for key in table}
    if unknown:
        raise KeyError(f"not in the key table: {', '.join(sorted(unknown))}")
    # Values are checked before (dynoproto.validate): none holds '=' or a line break.
    return "\n".join(f"{key.name}={key.codec.write(values[key.name])}" for key in table if key.name in values)


def by_key(fields: FieldKeys, command: Any) -> Dict[str, Any]:
    """*command*'s fields (read by name, from a dataclass or a protobuf message) under their keys."""
    return {key: getattr(command, name) for name, key in fields}


def with_trace_id(text: str, trace_id: str) -> str:
    return f"{text}\n{TRACE_ID_KEY}={trace_id}"


def parse(text: str) -> Dict[str, str]:
    """``KEY=VALUE`` lines → their raw values."""
    values: Dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigTextError(f"config line {line!r} is not KEY=VALUE")
        values[key.strip()] = value.strip()
    return values


def read(table: Table, raw: Mapping[str, str]) -> Dict[str, Any]:
    """Every key of *table* as its type: absent or empty values take the key's default."""
    out: Dict[str, Any] = {}
    for key in table:
        text = raw.get(key.name, "").strip()
        if not text:
            out[key.name] = key.default
            continue
        try:
            out[key.name] = key.codec.read(text)
        except ValueError as exc:
            raise ConfigTextError(f"{key.name}={text} is not {exc}") from None
    return out
