"""The checks a command's values must pass, applied by ``dyno`` before sending and by the daemon on
receipt (other clients exist), whichever wire brought them.

A check reads values, not messages: each is given the field's path in its message (``targets.pids``)
and its value, and returns what is wrong as :class:`FieldError`\\ s, which name the field; the kind's
declaration (:mod:`.schema`) turns the path into the flag a user types. Values end up in ``KEY=VALUE``
config text that torch_npu splits on ``=`` and newlines, so no value may contain either.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Sequence

MAX_PATH = 4096
MAX_LIST_TEXT = 1024
# What a refusal shows of a value, or of a list: an answer must stay short whatever was sent (gRPC
# refuses error metadata beyond a few KiB, and the reason would be lost).
SHOWN_CHARACTERS = 200
SHOWN_VALUES = 8


@dataclass(frozen=True)
class FieldError:
    field: str  # its path in the request: ``log_file``, ``targets.pids``, ``options.task_time``
    message: str
    flag: str = ""  # the flag a user types for it (``--rank-list``), filled in by the declaration

    def __str__(self) -> str:
        return f"{self.flag or self.field}: {self.message}"


# A check of one field's value: (the field's path, its value) -> what is wrong with it.
Check = Callable[[str, Any], List[FieldError]]


def quoted(text: str) -> str:
    """*text* quoted for a message; a long one cut, saying how long it was."""
    if len(text) <= SHOWN_CHARACTERS:
        return repr(text)
    return f"{text[:SHOWN_CHARACTERS]!r}... ({len(text)} characters)"


def within(low: float, high: float, expected: str) -> Check:
    """A number in low..high (NaN and the infinities are not), refused as "must be *expected*"."""

    def check(field: str, value: Any) -> List[FieldError]:
        if value is None or low <= value <= high:
            return []
        return [FieldError(field, f"must be {expected}, got {value}")]

    return check


def finite(low: float, expected: str) -> Check:
    """A number >= *low* and finite; None (not given) passes."""
    return within(low, sys.float_info.max, expected)


def numbers(most: int, lowest: int, rule: str) -> Check:
    """At most *most* numbers, each >= *lowest*; the answer names the first bad one, never the list (a
    long one would not fit in the error's metadata)."""

    def check(field: str, values: Sequence[int]) -> List[FieldError]:
        if len(values) > most:
            return [FieldError(field, f"lists {len(values)} numbers, more than {most}")]
        bad = next((i for i, value in enumerate(values) if value < lowest), None)
        if bad is None:
            return []
        return [FieldError(field, f"{rule}, got {values[bad]} (number {bad + 1} of {len(values)})")]

    return check


def one_of(allowed: Iterable[str]) -> Check:
    """Empty (the default), or one of *allowed*."""
    choices = tuple(allowed)

    def check(field: str, value: str) -> List[FieldError]:
        if value and value not in choices:
            return [FieldError(field, f"must be one of {', '.join(choices)}; got {quoted(value)}")]
        return []

    return check


def some_of(allowed: Iterable[str], required: bool = False) -> Check:
    """Each of the values one of *allowed*; with *required*, at least one value."""
    choices = tuple(allowed)

    def check(field: str, values: Sequence[str]) -> List[FieldError]:
        if required and not values:
            return [FieldError(field, f"needs at least one of {', '.join(choices)}")]
        bad = [v for v in values if v not in choices]
        if not bad:
            return []
        shown = ", ".join(v[:SHOWN_CHARACTERS] for v in bad[:SHOWN_VALUES])
        more = f" and {len(bad) - SHOWN_VALUES} more" if len(bad) > SHOWN_VALUES else ""
        return [FieldError(field, f"accepts {', '.join(choices)}; got {shown}{more}")]

    return check


def output_path(field: str, path: str) -> List[FieldError]:
    """An absolute path on the traced node, that every reader reads as it was checked."""
    if not path:
        return [FieldError(field, "is required")]
    if not path.startswith("/"):
        return [FieldError(field, f"must be an absolute path on the traced node, got {quoted(path)}")]
    if len(path) > MAX_PATH:
        return [FieldError(field, f"is longer than {MAX_PATH} characters")]
    # Kineto's reader cuts a line at '#' (a comment), so it would write where the part before points,
    # not where the whole path was checked against --trace-root; no reader needs '#' in a path.
    if "#" in path:
        why = "may not contain '#' (Kineto reads the rest as a comment)"
        return [FieldError(field, f"{why}: {quoted(path)}")]
    return config_safe(field, path)


def optional_output_path(field: str, path: str) -> List[FieldError]:
    """:func:`output_path`, where none (``""``) is a choice."""
    return output_path(field, path) if path else []


def kineto_file(field: str, path: str) -> List[FieldError]:
    """Kineto inserts ``_<pid>`` before the first ``.json`` of its log file: in a folder's name that
    would be another folder than the one checked, so ``.json`` may appear in the file name only."""
    folder = path.rpartition("/")[0]
    if ".json" not in folder:
        return []
    why = "may have '.json' in its file name only (Kineto inserts the pid before the first one)"
    return [FieldError(field, f"{why}: {quoted(path)}")]


def names(field: str, values: Sequence[str]) -> List[FieldError]:
    """Names that travel as one comma list: none empty, none with a comma, none msMonitor's ``None``."""
    if len(",".join(values)) > MAX_LIST_TEXT:
        return [FieldError(field, f"is longer than {MAX_LIST_TEXT} characters")]
    errors = []
    for value in values:
        if not value or "," in value:
            errors.append(FieldError(field, f"has an empty or comma-containing name {quoted(value)}"))
        elif value == "None":  # msMonitor's config text spells an empty list so: the name would vanish
            errors.append(FieldError(field, "may not name 'None', which the config text reads as no names"))
        errors += config_safe(field, value)
    return errors


def short_text(field: str, value: str) -> List[FieldError]:
    """Free text of at most MAX_LIST_TEXT characters that survives the config text unchanged."""
    if len(value) > MAX_LIST_TEXT:
        return [FieldError(field, f"is longer than {MAX_LIST_TEXT} characters")]
    return config_safe(field, value)


def int_text(ok: Callable[[int], bool], expected: str) -> Check:
    """An integer kept as its text (msMonitor's rotation keys), or empty."""

    def check(field: str, text: str) -> List[FieldError]:
        # ASCII digits only: int() also takes surrounding whitespace, "1_000" and other scripts' digits,
        # which the process's reader refuses (and then the whole command with it).
        if not text or (re.fullmatch(r"-?[0-9]+", text) and ok(int(text))):
            return []
        return [FieldError(field, f"must be {expected}, got {quoted(text)}")]

    return check


def config_safe(field: str, value: str) -> List[FieldError]:
    # Readers split lines as str.splitlines does (form feed, U+2028, ... end a line too) and trim each
    # value: a value must survive both unchanged, or the process reads something else than was accepted.
    if "=" in value or len(value.splitlines()) > 1 or value != value.strip():
        return [
            FieldError(
                field,
                "may not contain '=' or a line break, nor begin or end with a space "
                f"(the config text is trimmed KEY=VALUE lines): {quoted(value)}",
            )
        ]
    # A control character (NUL, backspace, ESC, ...) has no place in a path or a name, and a client
    # that does not escape its JSON (dynolog's and msMonitor's dyno) sends "\b" as one.
    if any(unicodedata.category(c) == "Cc" for c in value):
        return [FieldError(field, f"may not contain a control character: {quoted(value)}")]
    return []


def all_of(*checks: Check) -> Check:
    """Each check in turn, until one finds something wrong."""

    def check(field: str, value: Any) -> List[FieldError]:
        for one in checks:
            errors = one(field, value)
            if errors:
                return errors
        return []

    return check
