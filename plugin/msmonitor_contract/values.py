"""The value types a declared field holds (:mod:`.schema`): each one's Python type, the wire's zero, how
its config-text key writes and reads it, how a flag's text reads as it, and the flag's metavar.
Standard library only, and cheap to import: ``dyno`` parses its flags with these before it loads any
declaration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from . import configtext
from .configtext import Codec
from .vocabulary import split_list


class FlagValueError(ValueError):
    """A flag's text that does not read as its type; the message says what was expected."""


@dataclass(frozen=True)
class Value:
    """What one field holds: its Python type, the wire's value when not given, how its config-text
    key writes and reads it, how a flag's text reads as it, and the flag's metavar."""

    metavar: str
    python: Any
    zero: Any
    codec: Codec
    parse: Callable[[str], Any]
    repeated: bool = False
    switch: bool = False  # a flag that takes no value: given means true
    bare: Optional[str] = None  # what a flag given alone stands for (msprof's ``--aicpu``: on)


def int_list(text: str) -> List[int]:
    """``1,2,3`` as integers that fit a pid or rank (int32)."""
    try:
        values = [int(v) for v in split_list(text)]
    except ValueError:
        raise FlagValueError(f"expected comma-separated integers, got {text!r}") from None
    too_big = [v for v in values if not -(2**31) <= v < 2**31]
    if too_big:
        raise FlagValueError(f"{too_big[0]} is not a pid or rank (at most {2**31 - 1})")
    return values


def pid_list(text: str) -> List[int]:
    """:func:`int_list` where msMonitor's ``0`` (or nothing) means every process: no pid listed."""
    pids = int_list(text)
    return [] if pids == [0] else pids


def true_false(text: str) -> bool:
    """msMonitor's spelled-out booleans (``--data-simplification false``)."""
    if text not in ("true", "false"):
        raise FlagValueError(f"must be true or false, got {text!r}")
    return text == "true"


def on_off(text: str) -> bool:
    """msprof's switches: ``--aicpu=on`` or ``--aicpu=off``, and ``--aicpu`` alone for on."""
    if text not in ("on", "off"):
        raise FlagValueError(f"must be on or off, got {text!r}")
    return text == "on"


INT = Value("INT", int, 0, configtext.INT, int)
FLOAT = Value("FLOAT", float, 0.0, configtext.FLOAT, float)
BOOL = Value("BOOL", bool, False, configtext.BOOL, true_false, switch=True)
TEXT = Value("TEXT", str, "", configtext.TEXT, str)
# Booleans spelled out: msMonitor's ``--data-simplification false``; msprof's ``--aicpu=on`` (alone: on).
TRUE_FALSE = Value("true|false", bool, False, configtext.BOOL, true_false)
ON_OFF = Value("on|off", bool, False, configtext.BOOL, on_off, bare="on")
NAMES = Value("A,B", Tuple[str, ...], (), configtext.LIST, split_list, repeated=True)
NUMBERS = Value("N,N", Tuple[int, ...], (), configtext.LIST, int_list, repeated=True)
