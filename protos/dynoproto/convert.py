"""Protobuf messages and the models of :mod:`msmonitor_contract` (and ``dyno``'s), converted field by
field, by name: the one place either side of the gRPC edge turns a message into plain values and back.

A model's field holds what the proto field holds: a repeated field as a tuple, a message as a nested
model (absent: its default, or None where the model says it is optional), an enum as the member the
model's enum names. Tests hold every model to its message (tests/test_declarations.py)."""

from __future__ import annotations

import struct
from typing import Any, Dict

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def fields(message: Message) -> Dict[str, Any]:
    """The fields *message* carries, as plain values (proto3 presence: unset optionals and messages are
    absent, as are scalars at their zero)."""
    return {f.name: _value(f, value) for f, value in message.ListFields()}


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return dict(value)
    if field.is_repeated:
        return [fields(v) for v in value] if field.message_type is not None else list(value)
    if field.type == FieldDescriptor.TYPE_FLOAT:
        return as_typed(value)
    return fields(value) if field.message_type is not None else value


def as_typed(value: float) -> float:
    """A proto float as the user typed it: 0.1 arrives as 0.10000000149011612, which would reach the
    process's config text so; the shortest decimal that is the same float32 is what was meant."""
    single = struct.pack("<f", value)
    for digits in range(6, 10):
        shortest = float(f"{value:.{digits}g}")
        if struct.pack("<f", shortest) == single:
            return shortest
    return value
