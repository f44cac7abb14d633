"""Protobuf messages and the models of :mod:`msmonitor_contract` (and ``dyno``'s), converted field by
field, by name: the one place either side of the gRPC edge turns a message into plain values and back.

A model's field holds what the proto field holds: a repeated field as a tuple, a message as a nested
model (absent: its default, or None where the model says it is optional), an enum as the member the
model's enum names. Tests hold every model to its message (tests/test_declarations.py)."""

from __future__ import annotations

import dataclasses
import enum
import struct
import typing
from typing import Any, Dict, Tuple, Type, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from msmonitor_contract.vocabulary import enum_prefix


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


# --- the client's models ------------------------------------------------------------------------------


def to_model(cls: Type[_Model], message: Message) -> _Model:
    """*message* as the dataclass *cls* of the same fields (a message of the client's model)."""
    kwargs = {name: _model_value(hint, message, name) for name, hint in _hints(cls).items()}
    return cls(**kwargs)


def to_proto(cls: Type[_Message], model: Any) -> _Message:
    """*model* (a dataclass with the message's fields, a request model among them) as a *cls* message;
    a None field is left unset."""
    message = cls()
    _fill(message, model)
    return message


_Model = TypeVar("_Model")
_Message = TypeVar("_Message", bound=Message)
_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    """The dataclass's fields and their types, worked out once per class."""
    if cls not in _HINTS:
        types = typing.get_type_hints(cls)
        _HINTS[cls] = {f.name: types[f.name] for f in dataclasses.fields(cls)}
    return _HINTS[cls]


def _model_value(hint: Any, message: Message, name: str) -> Any:
    value = getattr(message, name)
    descriptor = message.DESCRIPTOR.fields_by_name[name]
    inner, optional = _unwrap(hint)
    if optional and descriptor.has_presence and not message.HasField(name):
        return None
    if typing.get_origin(inner) is tuple:
        element = typing.get_args(inner)[0]
        return tuple(_element(element, descriptor, v) for v in value)
    if typing.get_origin(inner) is dict:
        return dict(value)
    return _element(inner, descriptor, value)


def _element(hint: Any, descriptor: Any, value: Any) -> Any:
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return to_model(hint, value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        proto = descriptor.enum_type.values_by_number.get(value)
        prefix = enum_prefix(descriptor.enum_type.name)
        member = proto.name[len(prefix) :] if proto is not None else ""
        return hint.__members__.get(member)  # None: UNSPECIFIED, or a number this dyno does not know
    return value


def _unwrap(hint: Any) -> Tuple[Any, bool]:
    """Optional[X] -> (X, True); X -> (X, False)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union and type(None) in args:
        return next(a for a in args if a is not type(None)), True
    return hint, False


def _fill(message: Message, model: Any) -> None:
    for f in dataclasses.fields(model):
        value = getattr(model, f.name)
        if value is None:
            continue
        descriptor = message.DESCRIPTOR.fields_by_name[f.name]
        if descriptor.is_repeated:
            target = getattr(message, f.name)
            for item in value:
                if descriptor.message_type is not None:
                    _fill(target.add(), item)
                else:
                    target.append(_proto_value(descriptor, item))
        elif descriptor.message_type is not None:
            submessage = getattr(message, f.name)
            submessage.SetInParent()
            _fill(submessage, value)
        else:
            setattr(message, f.name, _proto_value(descriptor, value))


def _proto_value(descriptor: Any, value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return descriptor.enum_type.values_by_name[enum_prefix(descriptor.enum_type.name) + value.name].number
    return value
