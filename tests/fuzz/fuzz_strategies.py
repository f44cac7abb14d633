"""Strategies shared by the fuzz tests: IPC datagrams of every type (valid, valid-looking, truncated and
garbage), JSON values, config-safe text, and protobuf requests with every field drawn at random."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from typing import Any, Callable, Dict, List, Mapping, Optional, Type

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import settings
from hypothesis import strategies as st

from msmonitor_contract import wire
from msmonitor_contract.kinds import dynamic, npumonitor, nputrace, tracing

# Every message class carried as JSON, and what the compatibility types unpack into.
JSON_MESSAGES: List[Type[wire.JsonMessage]] = [
    wire.Hello,
    wire.Ack,
    wire.Bye,
    wire.Command,
    wire.TraceEvent,
    wire.MonitorEvent,
]
JSON_TYPES: Dict[str, Type[wire.JsonMessage]] = {
    wire.HELLO: wire.Hello,
    wire.ACK: wire.Ack,
    wire.BYE: wire.Bye,
    wire.COMMAND: wire.Command,
    wire.EVENT: wire.TraceEvent,
    wire.MONITOR: wire.MonitorEvent,
}
MESSAGE_TYPES = [
    wire.REQ,
    wire.CTXT,
    wire.NPU_TRACE_STATUS,
    wire.NPU_MONITOR_STATUS,
    wire.DATA,
    wire.METRICS,
    *JSON_TYPES,
]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def scaled(examples: int) -> settings:
    """``max_examples`` for one test: as given under the default profile, twenty times under ``explore``."""
    factor = 20 if os.environ.get("HYPOTHESIS_PROFILE") == "explore" else 1
    return settings(max_examples=examples * factor)


# --- JSON ------------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(*INT64)
    | st.floats()  # NaN and the infinities too: json.loads accepts them
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def mostly(valid: st.SearchStrategy[Any], anything: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """*valid* seven times in eight: so that inputs often get past the first check to the code behind it."""
    return st.sampled_from(range(8)).flatmap(lambda i: valid if i < 7 else anything)


def _valid_value(name: str, annotation: str) -> st.SearchStrategy[Any]:
    """A value of one field that the wire's checks accept (integers sized for their gRPC field)."""
    bounds = INT64 if name in wire._INT64_FIELDS else INT32
    scalars: Dict[str, st.SearchStrategy[Any]] = {
        "int": st.integers(*bounds),
        "str": st.text(max_size=30),
        "float": st.floats(allow_nan=False) | st.integers(*INT32),
        "bool": st.booleans(),
    }
    if annotation in scalars:
        return scalars[annotation]
    if annotation.startswith("List["):
        return st.lists(scalars[annotation[5:-1]], max_size=5)
    if annotation == "Dict[str, str]":
        return st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=4)
    raise AssertionError(f"no strategy for {annotation}")


def valid_messages(cls: Type[wire.JsonMessage]) -> st.SearchStrategy[wire.JsonMessage]:
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return st.builds(cls, **{f.name: _valid_value(f.name, str(f.type)) for f in fields})


def json_objects(cls: Type[wire.JsonMessage]) -> st.SearchStrategy[Dict[str, Any]]:
    """Objects with some of *cls*'s fields, each of the right type or anything, plus unknown keys."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    known = {f.name: _valid_value(f.name, str(f.type)) | json_values for f in fields}
    return st.fixed_dictionaries({}, optional=known).flatmap(
        lambda d: st.dictionaries(st.text(max_size=8), json_values, max_size=3).map(lambda x: {**x, **d})
    )


# --- payloads of every type ------------------------------------------------------------------------


def _mutated(payloads: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """A payload, or that payload cut short, extended, or with one byte flipped."""

    @st.composite
    def mutate(draw: st.DrawFn) -> bytes:
        data = draw(payloads)
        how = draw(st.sampled_from(["as is", "as is", "truncate", "extend", "flip"]))
        if how == "truncate" and data:
            return data[: draw(st.integers(0, len(data) - 1))]
        if how == "extend":
            return data + draw(st.binary(min_size=1, max_size=8))
        if how == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        return data

    return mutate()


@st.composite
def _req_payloads(draw: st.DrawFn) -> bytes:
    count = draw(st.integers(-3, wire.MAX_PIDS + 3) | st.integers(*INT32))
    carried = draw(st.integers(0, wire.MAX_PIDS + 2)) if draw(st.booleans()) else max(0, min(count, 70))
    head = struct.pack("=iiq", draw(st.integers(*INT32)), count, draw(st.integers(*INT64)))
    return head + b"".join(struct.pack("=i", draw(st.integers(*INT32))) for _ in range(carried))


def _struct_payloads(fmt: str) -> st.SearchStrategy[bytes]:
    sizes = {"i": INT32, "q": INT64}
    return st.tuples(*(st.integers(*sizes[c]) for c in fmt if c in sizes)).map(
        lambda values: struct.pack("=" + fmt, *values)
    )


def _json_payloads(cls: Type[wire.JsonMessage]) -> st.SearchStrategy[bytes]:
    return (
        valid_messages(cls).map(lambda m: m.to_payload())
        | json_objects(cls).map(lambda d: json.dumps(d).encode())
        | json_values.map(lambda v: json.dumps(v).encode())
    )


# Values a report field must refuse: beyond the gRPC field it ends up in, not an integer at all.
edge_numbers = st.sampled_from([-1, 2**63, -(2**63) - 1, 2**64, float("inf"), float("nan"), 0.5, "7", None])
edge_values = edge_numbers | json_values


def _field(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return mostly(valid, edge_values)


_names = st.fixed_dictionaries(
    {
        "name": _field(st.text(max_size=8)),
        "count": _field(st.integers(0, 9)),
        "total_ns": _field(st.integers(0, 9)),
    },
    optional={"domain": mostly(st.text(max_size=4), edge_values)},
)
_metric_kinds = st.fixed_dictionaries(
    {
        "kind": _field(st.sampled_from(["Kernel", "API", "Marker", "Hccl"])),
        "device": _field(st.integers(-1, 7)) | st.integers(-2, 300),
        "count": _field(st.integers(0, 10)),
        "total_ns": _field(st.integers(0, 10**12)),
        "min_ns": _field(st.integers(0, 10)),
        "max_ns": _field(st.integers(0, 10)),
    },
    optional={
        "top": _field(st.lists(mostly(_names, edge_values), max_size=3)),
        "cont": st.booleans(),
        "distinct": _field(st.integers(0, 5)),
        "other": _field(st.fixed_dictionaries({}, optional={"count": edge_values, "total_ns": edge_values})),
    },
)
_metric_chunks = st.fixed_dictionaries(
    {
        "v": _field(st.just(1)),
        "seq": _field(st.integers(0, 3)),
        "pid": _field(st.integers(1, 3)),
        "part": mostly(st.just(0), st.integers(-1, 3) | edge_values),
        "parts": mostly(st.just(1), st.integers(-1, 4) | edge_values),
        "backend": _field(st.text(max_size=6)),
        "start_ns": _field(st.integers(*INT64)),
        "end_ns": _field(st.integers(*INT64)),
        "sampled_ns": _field(st.integers(0, 10**9)),
        "kinds": _field(st.lists(mostly(_metric_kinds, edge_values), max_size=3)),
    },
    optional={
        "dropped": st.dictionaries(st.text(max_size=5), _field(st.integers(0, 9)), max_size=2),
        "unavailable": st.dictionaries(st.text(max_size=5), json_values, max_size=2),
        "counters": st.dictionaries(st.text(max_size=5), _field(st.integers(0, 9)), max_size=2),
        "final": json_values,
    },
)
_data_messages = st.fixed_dictionaries(
    {
        "kind": _field(st.sampled_from(["Kernel", "Marker", "API"])),
        "deviceId": _field(st.sampled_from([0, 7, 2**32 - 1])) | st.integers(-(2**40), 2**40),
        "duration": _field(st.integers(0, 10**12)),
        "timestamp": _field(st.integers(*INT64)),
    },
    optional={"name": json_values, "domain": _field(st.text(max_size=4))},
)
metric_chunks = _metric_chunks.map(lambda d: json.dumps(d).encode())
data_messages = _data_messages.map(lambda d: json.dumps(d).encode())

PAYLOADS: Dict[str, st.SearchStrategy[bytes]] = {
    wire.REQ: _req_payloads(),
    wire.CTXT: _struct_payloads("iiq"),
    wire.NPU_TRACE_STATUS: _struct_payloads("iiiii4xq"),
    wire.NPU_MONITOR_STATUS: _struct_payloads("iiiii4xq"),
    wire.DATA: data_messages,
    wire.METRICS: metric_chunks,
    **{t: _json_payloads(cls) for t, cls in JSON_TYPES.items()},
}


def payloads(msg_type: str) -> st.SearchStrategy[bytes]:
    return _mutated(PAYLOADS[msg_type]) | st.binary(max_size=64)


# --- whole datagrams -------------------------------------------------------------------------------


@st.composite
def _lying_headers(draw: st.DrawFn) -> bytes:
    """A header whose size or type field is wrong, over some payload."""
    payload = draw(st.binary(max_size=48))
    size = draw(
        st.sampled_from([0, len(payload) + 1, max(0, len(payload) - 1), 2**64 - 1])
        | st.integers(0, 2**64 - 1)
    )
    raw_type = draw(
        st.binary(min_size=32, max_size=32)
        | st.sampled_from(MESSAGE_TYPES).map(lambda t: t.encode().ljust(32, b"x"))  # no NUL
        | st.just(b"\0" * 32)
    )
    return wire.HEADER.pack(size, raw_type) + payload


def well_framed(msg_type: Optional[st.SearchStrategy[str]] = None) -> st.SearchStrategy[bytes]:
    """A correct header of a known type over a payload for that type (valid or not)."""
    return (msg_type if msg_type is not None else st.sampled_from(MESSAGE_TYPES)).flatmap(
        lambda t: payloads(t).map(lambda p: wire.encode(t, p))
    )


unknown_types = st.text(
    st.characters(min_codepoint=1, max_codepoint=127), min_size=1, max_size=wire.TYPE_SIZE - 1
).filter(lambda t: t not in MESSAGE_TYPES)

datagrams = st.one_of(
    well_framed(),
    well_framed().flatmap(lambda d: st.integers(0, len(d) - 1).map(lambda n: d[:n])),  # truncated
    _lying_headers(),
    unknown_types.flatmap(lambda t: st.binary(max_size=32).map(lambda p: wire.encode(t, p))),
    st.binary(max_size=80),
)


# --- config text -----------------------------------------------------------------------------------

# What a value of config text may not hold: '=' splits it, and every line boundary str.splitlines knows.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
UNSAFE = "=" + LINE_BREAKS + "\0"


def config_safe(text: str) -> str:
    return "".join(c for c in text if c not in UNSAFE).strip()


# Text that mixes the characters that matter to a line-based KEY=VALUE reader with anything else.
tricky_text = st.lists(
    st.sampled_from([*UNSAFE, " ", "\t", "#", ",", "None", "a", "é", "/"]), max_size=12
).map("".join) | st.text(max_size=24)


# --- protobuf requests -----------------------------------------------------------------------------

FieldStrategies = Mapping[str, st.SearchStrategy[Any]]

_BY_TYPE: Dict[int, Callable[[FieldDescriptor], st.SearchStrategy[Any]]] = {
    FieldDescriptor.TYPE_INT32: lambda f: st.integers(*INT32),
    FieldDescriptor.TYPE_SINT32: lambda f: st.integers(*INT32),
    FieldDescriptor.TYPE_INT64: lambda f: st.integers(*INT64),
    FieldDescriptor.TYPE_SINT64: lambda f: st.integers(*INT64),
    FieldDescriptor.TYPE_UINT32: lambda f: st.integers(0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: lambda f: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_BOOL: lambda f: st.booleans(),
    FieldDescriptor.TYPE_STRING: lambda f: tricky_text,
    FieldDescriptor.TYPE_DOUBLE: lambda f: st.floats(),
    FieldDescriptor.TYPE_FLOAT: lambda f: st.floats(width=32),
    FieldDescriptor.TYPE_ENUM: lambda f: (
        st.sampled_from([v.number for v in f.enum_type.values]) | st.integers(-2, 1000)
    ),  # proto3 enums are open: unknown numbers arrive too
}


def messages(
    cls: Type[Message], overrides: Optional[FieldStrategies] = None, prefix: str = ""
) -> st.SearchStrategy[Message]:
    """Instances of *cls* with any subset of fields set at random; *overrides* maps a field path
    (``targets.pids``) to the strategy of its value (the list, for a repeated field)."""
    overrides = overrides or {}
    descriptor: Descriptor = cls.DESCRIPTOR

    def field_strategy(f: FieldDescriptor) -> st.SearchStrategy[Any]:
        path = prefix + f.name
        if path in overrides:
            return overrides[path]
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            return st.dictionaries(_BY_TYPE[key.type](key), _BY_TYPE[value.type](value), max_size=3)
        if f.message_type is not None:
            inner = messages(GetMessageClass(f.message_type), overrides, path + ".")
            return st.lists(inner, max_size=2) if _repeated(f) else inner
        one = _BY_TYPE[f.type](f)
        return st.lists(one, max_size=4) if _repeated(f) else one

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        message = cls()
        for f in descriptor.fields:
            path = prefix + f.name
            steered = any(o == path or o.startswith(path + ".") for o in overrides)
            if not steered and not draw(st.booleans()):
                continue
            value = draw(field_strategy(f))
            target = getattr(message, f.name)
            if f.message_type is not None and f.message_type.GetOptions().map_entry:
                target.update(value)
            elif _repeated(f):
                target.extend(value)
            elif f.message_type is not None:
                target.CopyFrom(value)
            else:
                setattr(message, f.name, value)
        return message

    return build()


def _repeated(f: FieldDescriptor) -> bool:
    return bool(f.is_repeated)


# --- requests that often pass validation ----------------------------------------------------------


def _choices(allowed: Any) -> st.SearchStrategy[str]:
    return mostly(st.sampled_from(["", *allowed]), tricky_text)


def _lists(allowed: Any, min_size: int = 0) -> st.SearchStrategy[List[str]]:
    return mostly(
        st.lists(st.sampled_from(allowed), min_size=min_size, max_size=3, unique=True),
        st.lists(st.sampled_from(allowed) | tricky_text, max_size=3),
    )


paths = mostly(
    st.sampled_from(["/tmp/fuzz", "/tmp/fuzz/", "/"])
    | st.text(max_size=12).map(lambda t: "/tmp/fuzz/" + config_safe(t)),
    tricky_text.map(lambda t: "/tmp/fuzz/" + t) | tricky_text | st.just("relative"),
)
names = mostly(st.text(max_size=8).map(lambda t: config_safe(t.replace(",", ""))).filter(bool), tricky_text)
small = st.integers(0, 5)
# Mostly plausible values, so that a good share of requests is accepted and rendered.
TARGETS = {
    "targets.job_id": mostly(small, st.integers(*INT64)),
    "targets.pids": st.lists(mostly(st.integers(1, 5), st.integers(*INT32)), max_size=3),
    "targets.ranks": st.lists(mostly(small, st.integers(*INT32)), max_size=3),
    "targets.process_limit": mostly(small, st.integers(*INT32)),
}
NPU_TRACE = {
    **TARGETS,
    "log_file": paths,
    "start_step": mostly(st.integers(-1, 100), st.integers(*INT64)),
    "iterations": mostly(st.integers(0, 10), st.integers(*INT32)),
    "duration_ms": mostly(st.integers(1, 10**6), st.integers(*INT64)),
    "profile_start_time_ms": mostly(st.just(0), st.integers(*INT64)),
    "activities": _lists(tracing.ACTIVITIES, min_size=1),
    "profiler_level": _choices(nputrace.PROFILER_LEVELS),
    "aic_metrics": _choices(nputrace.AIC_METRICS),
    "export_type": _choices(nputrace.EXPORT_TYPES),
    "host_sys": _lists(nputrace.HOST_SYS),
    "async_mode": mostly(st.just(False), st.booleans()),
    "gc_detect_threshold": mostly(st.floats(0, 100, width=32), st.floats(width=32)),
    "mstx_domain_include": st.lists(names, max_size=3),
    "mstx_domain_exclude": st.lists(names, max_size=3),
}
GPU_TRACE = {
    **TARGETS,
    "log_file": paths,
    "iterations": mostly(st.integers(0, 10), st.integers(*INT64)),
    "duration_ms": mostly(st.integers(1, 10**6), st.integers(*INT64)),
    "profile_start_time_ms": mostly(st.just(0), st.integers(*INT64)),
    "profile_start_iteration_roundup": mostly(st.integers(0, 4), st.integers(*INT64)),
    "profile_memory": mostly(st.just(False), st.booleans()),
}
NPU_MONITOR = {
    **TARGETS,
    "log_file": st.just("") | paths,
    "stop": mostly(st.just(False), st.booleans()),
    "duration_s": mostly(st.floats(0, 100, width=32), st.floats(width=32)),
    "activity_kinds": _lists(npumonitor.ACTIVITY_KINDS),
    "export_type": _choices((*npumonitor.EXPORT_TYPES, "db", "jsonl")),
    "jsonl_rotate_log_lines": _choices(["99", "100", "500000", "500001", "-1"]),
    "jsonl_rotate_log_files": _choices(["-1", "0", "1", "2", "9"]),
    "filter": _choices(["Kernel:a,b;API:c", "Kernel:", "Marker: x ,y;"]),
    "top_n": mostly(st.integers(0, 1000), st.integers(*INT32)),
}
DYNAMIC = {
    **{"attach." + k: v for k, v in TARGETS.items()},
    "attach.targets.pids": st.lists(mostly(st.integers(1, 5), st.integers(*INT32)), min_size=1, max_size=3),
    "attach.output": paths,
    "attach.options.activities": _lists(tracing.ACTIVITIES, min_size=1),
    "attach.options.task_time": _choices(dynamic.TASK_TIMES),
    "attach.options.aic_metrics": _choices(nputrace.AIC_METRICS),
    "attach.options.host_sys": _lists(nputrace.HOST_SYS),
    "attach.options.export_type": _choices(dynamic.EXPORT_TYPES),
    "attach.idle_timeout_s": mostly(st.floats(0, 3600), st.floats()),
    "attach.wait_registration_s": mostly(st.floats(0, 10), st.floats()),
}
