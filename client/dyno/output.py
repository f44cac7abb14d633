"""How `dyno` prints: a readable form for people, ``--json`` for machines (and nothing else on stdout)."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, Sequence

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def as_dict(message: Message) -> Dict[str, Any]:
    """The message as JSON-ready data, every field present, 64-bit integers as numbers.

    (The proto3 JSON mapping writes int64 as strings for JavaScript; our consumers are scripts.)
    """
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    _numbers_back(message.DESCRIPTOR, data)
    return data


_INT64 = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64}


def _numbers_back(descriptor: Any, data: Dict[str, Any]) -> None:
    for f in descriptor.fields:
        if f.name not in data:
            continue
        value = data[f.name]
        if f.type in _INT64:
            data[f.name] = [int(v) for v in value] if isinstance(value, list) else int(value)
        elif f.message_type is not None and not f.message_type.GetOptions().map_entry:
            for item in value if isinstance(value, list) else [value]:
                _numbers_back(f.message_type, item)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


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
