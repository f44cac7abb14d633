"""The IPC wire decodes whatever bytes arrive into a message or a WireError, and every message it can
encode decodes back to itself."""

from __future__ import annotations

import json
import socket
import struct
from typing import Any, Type

import pytest
from fuzz_strategies import (
    INT32,
    INT64,
    JSON_MESSAGES,
    JSON_TYPES,
    datagrams,
    json_objects,
    json_values,
    payloads,
    scaled,
    valid_messages,
)
from hypothesis import given
from hypothesis import strategies as st

from msmonitor_contract import wire

type_names = st.text(
    st.characters(min_codepoint=1, max_codepoint=127), min_size=1, max_size=wire.TYPE_SIZE - 1
)


# --- the frame -------------------------------------------------------------------------------------


@scaled(150)
@given(datagrams)
def test_decode_returns_a_datagram_or_raises_wire_error(data: bytes) -> None:
    try:
        datagram = wire.decode(data)
    except wire.WireError:
        return
    assert len(data) == wire.HEADER_SIZE + len(datagram.payload)
    assert 0 < len(datagram.type) < wire.TYPE_SIZE and "\0" not in datagram.type
    assert wire.decode(wire.encode(datagram.type, datagram.payload)) == datagram


@scaled(60)
@given(type_names, st.binary(max_size=256))
def test_encode_then_decode_is_identity(msg_type: str, payload: bytes) -> None:
    assert wire.decode(wire.encode(msg_type, payload)) == wire.Datagram(msg_type, payload)


@scaled(30)
@given(st.text(st.characters(max_codepoint=127), min_size=wire.TYPE_SIZE, max_size=40))
def test_encode_refuses_a_type_without_room_for_its_nul(msg_type: str) -> None:
    with pytest.raises(wire.WireError):
        wire.encode(msg_type)


@scaled(50)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300), st.binary(max_size=24)), max_size=4))
def test_credentials_from_any_ancillary_data(ancdata: Any) -> None:
    creds = wire.credentials(ancdata)
    if creds is not None:
        pid, uid = creds
        assert INT32[0] <= pid <= INT32[1] and 0 <= uid < 2**32
    if any(
        level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(p) >= 12
        for level, kind, p in ancdata
    ):
        assert creds is not None


# --- compatibility payloads (native structs) --------------------------------------------------------


@scaled(120)
@given(payloads(wire.REQ))
def test_kineto_request_unpacks_or_raises_and_repacks_byte_for_byte(payload: bytes) -> None:
    try:
        request = wire.KinetoRequest.unpack(payload)
    except wire.WireError:
        return
    assert 1 <= len(request.pids) <= wire.MAX_PIDS
    assert request.pack() == payload


@scaled(50)
@given(
    st.integers(*INT32),
    st.integers(*INT64),
    st.lists(st.integers(*INT32), min_size=1, max_size=wire.MAX_PIDS),
)
def test_kineto_request_round_trip(config_type: int, job_id: int, pids: Any) -> None:
    request = wire.KinetoRequest(config_type, job_id, tuple(pids))
    assert wire.KinetoRequest.unpack(request.pack()) == request


@scaled(60)
@given(payloads(wire.CTXT))
def test_kineto_context_unpacks_only_its_16_bytes(payload: bytes) -> None:
    try:
        context = wire.KinetoContext.unpack(payload)
    except wire.WireError:
        assert len(payload) != 16
        return
    assert context.pack() == payload


@scaled(50)
@given(st.integers(*INT32), st.integers(*INT32), st.integers(*INT64))
def test_kineto_context_round_trip(device: int, pid: int, job_id: int) -> None:
    context = wire.KinetoContext(device, pid, job_id)
    assert wire.KinetoContext.unpack(context.pack()) == context


@scaled(60)
@given(st.sampled_from([wire.NPU_TRACE_STATUS, wire.NPU_MONITOR_STATUS]).flatmap(payloads))
def test_npu_status_unpacks_only_its_32_bytes(payload: bytes) -> None:
    try:
        status = wire.NpuStatus.unpack(payload)
    except wire.WireError:
        assert len(payload) != 32
        return
    packed = status.pack()
    # Bytes 20..23 are the struct's padding before the int64 job id: not carried.
    assert packed[:20] == payload[:20] and packed[24:] == payload[24:]


@scaled(50)
@given(st.builds(wire.NpuStatus, *([st.integers(*INT32)] * 5), st.integers(*INT64)))
def test_npu_status_round_trip(value: wire.NpuStatus) -> None:
    assert wire.NpuStatus.unpack(value.pack()) == value


# --- this project's JSON messages ------------------------------------------------------------------


def _decoded_or_wire_error(cls: Type[wire.JsonMessage], payload: bytes) -> None:
    try:
        message = cls.from_payload(payload)
    except wire.WireError:
        return
    assert isinstance(message, cls)
    # What was accepted has the declared types: encoding it again decodes to the same value.
    assert cls.from_payload(message.to_payload()) == message


@pytest.mark.parametrize(("msg_type", "cls"), JSON_TYPES.items(), ids=list(JSON_TYPES))
@scaled(50)
@given(data=st.data())
def test_json_message_from_any_bytes(msg_type: str, cls: Type[wire.JsonMessage], data: st.DataObject) -> None:
    _decoded_or_wire_error(cls, data.draw(payloads(msg_type)))


@pytest.mark.parametrize("cls", JSON_MESSAGES, ids=lambda c: c.__name__)
@scaled(50)
@given(data=st.data())
def test_json_message_from_objects_of_any_field_types(
    cls: Type[wire.JsonMessage], data: st.DataObject
) -> None:
    _decoded_or_wire_error(cls, json.dumps(data.draw(json_objects(cls))).encode())


@pytest.mark.parametrize("cls", JSON_MESSAGES, ids=lambda c: c.__name__)
@scaled(40)
@given(data=st.data())
def test_json_message_round_trip(cls: Type[wire.JsonMessage], data: st.DataObject) -> None:
    message = data.draw(valid_messages(cls))
    assert cls.from_payload(message.to_payload()) == message


@scaled(30)
@given(json_values, st.integers(1, 3000))
def test_json_nesting_of_any_depth_is_a_wire_error(inner: Any, depth: int) -> None:
    payload = ("[" * depth + json.dumps(inner) + "]" * depth).encode()
    with pytest.raises(wire.WireError):
        wire.Hello.from_payload(payload)


# A struct that does not parse is refused whatever its type says: the header alone is never trusted.
@scaled(30)
@given(st.integers(0, 2**64 - 1), st.binary(max_size=8))
def test_a_size_that_lies_is_refused(size: int, payload: bytes) -> None:
    data = struct.pack("=Q32s", size, b"req") + payload
    if size == len(payload):
        assert wire.decode(data) == wire.Datagram("req", payload)
    else:
        with pytest.raises(wire.WireError):
            wire.decode(data)
