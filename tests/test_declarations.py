"""Each command kind's declaration (msmonitor_contract.kinds) agrees with its message in dynolog.proto:
the same fields, by name, with the same shape; a message converted by field name is the model back."""

from __future__ import annotations

from typing import Any, Iterator, Set

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from dynoproto import dynolog_pb2 as pb
from dynoproto.convert import fields
from msmonitor_contract.kinds import KINDS, NPUMONITOR, NPUTRACE
from msmonitor_contract.schema import Message
from msmonitor_contract.values import Value

SCALARS = {
    int: {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
    },
    float: {FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE},
    bool: {FieldDescriptor.CPPTYPE_BOOL},
    str: {FieldDescriptor.CPPTYPE_STRING},
}


def messages() -> Iterator[Message]:
    """Every message the kinds declare, nested ones included, once each."""
    seen: Set[str] = set()

    def walk(message: Message) -> Iterator[Message]:
        if message.name in seen:
            return
        seen.add(message.name)
        yield message
        for f in message.fields:
            if isinstance(f.type, Message):
                yield from walk(f.type)

    for kind in KINDS:
        yield from walk(kind)


def _element(value: Value) -> Any:
    """The Python type of one element: a repeated field's annotation is Tuple[T, ...]."""
    return value.python.__args__[0] if value.repeated else value.python


@pytest.mark.parametrize("message", list(messages()), ids=lambda m: m.name)
def test_each_declared_message_has_the_proto_messages_fields(message: Message) -> None:
    descriptor: Descriptor = getattr(pb, message.name).DESCRIPTOR
    assert [f.name for f in message.fields] != []
    assert {f.name for f in message.fields} == set(descriptor.fields_by_name), message.name
    for f in message.fields:
        proto = descriptor.fields_by_name[f.name]
        where = f"{message.name}.{f.name}"
        if isinstance(f.type, Message):
            assert proto.message_type is not None and proto.message_type.name == f.type.name, where
            assert not proto.is_repeated, where
            continue
        assert proto.message_type is None, where
        assert proto.is_repeated == f.type.repeated, where
        assert proto.cpp_type in SCALARS[_element(f.type)], where
        assert f.optional == proto.has_presence, where


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.command.value)
def test_each_kind_names_its_rpc_and_request(kind: Any) -> None:
    """Its RPC takes its message (a session's stream carries it in its first request: the attach)."""
    request = pb.DESCRIPTOR.services_by_name["Dynolog"].methods_by_name[kind.rpc].input_type
    carried = {f.message_type.name for f in request.fields if f.message_type is not None}
    assert kind.name == request.name or kind.name in carried


def test_a_message_converted_by_field_name_is_the_model() -> None:
    request = pb.NpuTraceRequest(
        targets=pb.Targets(job_id=7, ranks=[0, 2]),
        log_file="/t",
        start_step=0,  # proto3 leaves a zero out: the model's default is the wire's zero
        iterations=3,
        mstx_domain_include=["a", "b"],
        gc_detect_threshold=0.1,  # a float32: the value as typed, not 0.10000000149011612
    )
    model = NPUTRACE.build(fields(request))
    assert (model.targets.job_id, model.targets.ranks, model.log_file) == (7, (0, 2), "/t")
    assert (model.start_step, model.iterations, model.mstx_domain_include) == (0, 3, ("a", "b"))
    assert model.gc_detect_threshold == 0.1
    assert NPUTRACE.build(fields(pb.NpuTraceRequest())).gc_detect_threshold is None  # not given
    monitor = NPUMONITOR.build(
        fields(pb.NpuMonitorRequest(start=True, auto_trace=pb.AutoTrace(iterations=4)))
    )
    assert monitor.auto_trace.iterations == 4
    assert NPUMONITOR.build(fields(pb.NpuMonitorRequest(start=True))).auto_trace is None
