"""dyno's own model (dyno.model) agrees with dynolog.proto: each dataclass has its message's fields by
name and shape, and a message converted into the model and back is the message again."""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any, List, Tuple

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from dyno.model import commands, daemon, dynamic, monitoring, traces
from dyno.model.commands import ProcessOutcome
from dyno.model.daemon import LegacyStatus
from dyno.model.traces import TraceInfo
from dynoproto import dynolog_pb2 as pb
from dynoproto.convert import to_model, to_proto
from msmonitor_contract.vocabulary import enum_prefix
from test_declarations import SCALARS

# The model's classes that stand for a message of the same name (LegacyStatus is dyno's own: a C++
# daemon's answer as it came).
MODELS = [
    cls
    for module in (daemon, commands, traces, monitoring, dynamic)
    for cls in vars(module).values()
    if dataclasses.is_dataclass(cls)
    and isinstance(cls, type)
    and cls is not LegacyStatus
    and cls.__module__ == module.__name__
]
_SCALARS = {**SCALARS, bytes: {FieldDescriptor.CPPTYPE_STRING}}  # a file's data


def _unwrapped(hint: Any) -> Tuple[Any, bool]:
    """Optional[X] -> (X, True)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union and type(None) in args:
        return next(a for a in args if a is not type(None)), True
    return hint, False


def _problems(cls: type, descriptor: Descriptor) -> List[str]:
    hints = typing.get_type_hints(cls)
    wrong = []
    for f in dataclasses.fields(cls):
        proto = descriptor.fields_by_name[f.name]
        hint, optional = _unwrapped(hints[f.name])
        if proto.message_type is not None and proto.message_type.GetOptions().map_entry:
            ok = typing.get_origin(hint) is dict
        elif proto.is_repeated:
            ok = typing.get_origin(hint) is tuple
            hint = typing.get_args(hint)[0] if ok else hint
        else:
            ok = True
        if proto.message_type is not None and not proto.message_type.GetOptions().map_entry:
            # a message field: the model of that name, or a kind's request model (Any: its declaration's)
            ok = ok and (hint is Any or getattr(hint, "__name__", "") == proto.message_type.name)
            ok = ok and (optional or proto.is_repeated or hint is Any)
        elif proto.enum_type is not None:
            ok = ok and isinstance(hint, type) and issubclass(hint, enum.Enum)
            names = {v.name for v in proto.enum_type.values} - {
                enum_prefix(proto.enum_type.name) + "UNSPECIFIED"
            }
            ok = ok and {enum_prefix(proto.enum_type.name) + m for m in hint.__members__} <= names
        elif proto.message_type is None:
            ok = ok and proto.cpp_type in _SCALARS.get(hint, set())
        if not ok:
            wrong.append(f"{cls.__name__}.{f.name}: {hints[f.name]} for the proto's {proto.type}")
    return wrong


@pytest.mark.parametrize("cls", MODELS, ids=lambda cls: cls.__name__)
def test_each_model_class_has_its_messages_fields_in_their_shapes(cls: type) -> None:
    descriptor: Descriptor = getattr(pb, cls.__name__).DESCRIPTOR
    assert {f.name for f in dataclasses.fields(cls)} == set(descriptor.fields_by_name), cls.__name__
    assert _problems(cls, descriptor) == []


def test_a_message_into_the_model_and_back_is_the_same_message() -> None:
    info = pb.TraceInfo(trace_id="t1", kind="nputrace", created_at=3.5, done=True)
    process = info.processes.add(pid=7, host_pid=70, rank=1, phase=pb.TRACE_PHASE_FINISHED, files=["a", "b"])
    process.history.add(phase=pb.TRACE_PHASE_RUNNING, at=1.0)
    converted = to_model(TraceInfo, info)
    assert converted.processes[0].files == ("a", "b")
    assert to_proto(pb.TraceInfo, converted) == info


def test_an_enum_value_this_dyno_does_not_know_reads_as_none() -> None:
    outcome = pb.ProcessOutcome(pid=1)
    outcome.reason = 999  # a newer daemon's reason: proto3 keeps the number
    assert to_model(ProcessOutcome, outcome).reason is None
