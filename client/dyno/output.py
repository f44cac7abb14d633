"""How `dyno` prints: a readable form for people, ``--json`` for machines (and nothing else on stdout).

Much of what dyno shows comes from others: a process's hostname, backend and versions, a ``dyno
dynamic`` controller's user name, a daemon's messages and file names. :func:`escaped_terminal` puts one
filter in front of stdout and stderr for the whole command, so no control character from any of them
reaches the terminal raw, whichever command prints it; ``--json`` needs none (JSON escapes them).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Sequence, TextIO

if TYPE_CHECKING:
    from google.protobuf.message import Message

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


def as_dict(message: Message) -> Dict[str, Any]:
    """The message as JSON-ready data, every field present, 64-bit integers as numbers.

    (The proto3 JSON mapping writes int64 as strings for JavaScript; our consumers are scripts.)
    """
    from google.protobuf import json_format  # only --json pays for it

    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    _numbers_back(message.DESCRIPTOR, data)
    return data


def _numbers_back(descriptor: Any, data: Dict[str, Any]) -> None:
    for f in descriptor.fields:
        if f.name not in data:
            continue
        value = data[f.name]
        if f.type in (f.TYPE_INT64, f.TYPE_UINT64, f.TYPE_SINT64):
            data[f.name] = [int(v) for v in value] if isinstance(value, list) else int(value)
        elif f.message_type is not None and not f.message_type.GetOptions().map_entry:
            for item in value if isinstance(value, list) else [value]:
                _numbers_back(f.message_type, item)


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
