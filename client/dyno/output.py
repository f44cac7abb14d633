"""How `dyno` prints: a readable form for people, ``--json`` for machines (and nothing else on stdout).

Much of what dyno shows comes from others: a process's hostname, backend and versions, a ``dyno
dynamic`` controller's user name, a daemon's messages and file names. :func:`escaped_terminal` puts one
filter in front of stdout and stderr for the whole command, so no control character from any of them
reaches the terminal raw, whichever command prints it; ``--json`` needs none (JSON escapes them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import io
import re
import sys
import typing
from typing import Any, Dict, Iterator, Optional, Sequence, TextIO

from msmonitor_contract.vocabulary import enum_prefix

# C0 controls but newline and tab, DEL, and C1 (0x9b is CSI on some terminals): ESC sequences retitle
# windows, move the cursor, rewrite lines, or (OSC 52) set the clipboard; CR overwrites what was shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    r"""*text* with each control character written as ``\xNN``, visible and inert."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class EscapingStream(io.TextIOBase):
    """A text stream that writes to *stream* with :func:`escape_controls` applied."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(escape_controls(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding


@contextlib.contextmanager
def escaped_terminal() -> Iterator[None]:
    """stdout and stderr through :class:`EscapingStream` while the command runs."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapingStream(out), EscapingStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def control(sequence: str) -> None:
    """Write dyno's own terminal *sequence* (clear the screen) past the filter."""
    stream = sys.stdout
    (stream.stream if isinstance(stream, EscapingStream) else stream).write(sequence)


def as_dict(model: Any) -> Dict[str, Any]:
    """A model (:mod:`dyno.model`, a kind's request) as JSON-ready data, as the proto3 JSON mapping
    writes its message with the proto's field names: every field present but an absent message, enums
    by their proto names (``TRACE_PHASE_FINISHED``); 64-bit integers as numbers, not the mapping's
    strings (which are for JavaScript; our consumers are scripts)."""
    hints = typing.get_type_hints(type(model))
    data: Dict[str, Any] = {}
    for f in dataclasses.fields(model):
        value = getattr(model, f.name)
        if value is None and not _enum_of(hints[f.name]):
            continue  # an absent message (or an optional number not given)
        if not isinstance(value, bytes):  # a file's data is never printed
            data[f.name] = _json(value, hints[f.name])
    return data


def _json(value: Any, hint: Any) -> Any:
    if isinstance(value, enum.Enum) or value is None:
        return _enum_name(value, _enum_of(hint))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return as_dict(value)
    if isinstance(value, tuple):
        element = _element(hint)
        return [_json(v, element) for v in value]
    return value


def _element(hint: Any) -> Any:
    args = typing.get_args(hint)
    return args[0] if args else Any


def _enum_of(hint: Any) -> Optional[type]:
    """The enum type a field holds (also as Optional[...] or a tuple's element), or None."""
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
            return candidate
    return None


def _enum_name(member: Optional[enum.Enum], kind: Optional[type]) -> str:
    """As the proto names the value: its enum's name in capitals, then the member's; None is the
    enum's UNSPECIFIED."""
    assert kind is not None
    return enum_prefix(kind.__name__) + (member.name if member is not None else "UNSPECIFIED")


def print_json(data: Any, indent: Optional[int] = 2) -> None:
    """*data* as one JSON document (on one line with ``indent=None``), flushed for whoever streams it."""
    import json  # only --json pays for it

    json.dump(data, sys.stdout, indent=indent)
    print(flush=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def duration(seconds: float) -> str:
    """3s, 4m05s, 2h03m, 5d02h: short enough for a table column."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def size_text(n: int) -> str:
    """Decimal units, as ``du --si`` and ``ls -lh --si`` show them."""
    if n < 1000:
        return f"{n} B"
    exponent = min(3, (len(str(n)) - 1) // 3)
    return f"{n / 1000**exponent:.1f} {' kMG'[exponent]}B"


def rank_text(rank: int) -> str:
    return "-" if rank < 0 else str(rank)
