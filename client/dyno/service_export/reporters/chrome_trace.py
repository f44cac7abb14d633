"""``--format json``: ``chrome_tracing.json`` for Perfetto or chrome://tracing: spans, events, metrics as
counters, operators, and each request's path across processes as a flow."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Set, Tuple

from ..model import Process, Recording, after, parse_attrs, parse_rid, single
from .atomic import replacing

# Thread ids of the kernel lanes, one per device and stream (above an OS thread's id), and of threads
# whose id is beyond that (see TraceIds).
KERNEL_LANE_BASE = 1_000_000
THREAD_LANE_BASE = 2_000_000


def _us(ns: int) -> float:
    return ns / 1000


@dataclass
class TraceIds:
    """The pid and tid each row gets in the trace. Perfetto reads them as 32-bit numbers (a larger one
    becomes 0, the process's own lane): a thread id beyond an OS thread's — Python's thread idents are
    addresses — gets a lane of its own from THREAD_LANE_BASE, named after it."""

    pids: Dict[Process, int]
    lanes: Dict[Tuple[Process, int], int]

    @classmethod
    def of(cls, recording: Recording) -> TraceIds:
        threads = {(row.process, row.tid) for rows in (recording.spans, recording.events) for row in rows}
        threads |= {(a.process, a.tid) for a in recording.api}
        lanes: Dict[Tuple[Process, int], int] = {}
        used: Dict[Process, int] = {}  # lanes given in each process
        for process, tid in sorted(threads):
            if not 0 <= tid < KERNEL_LANE_BASE:
                used[process] = used.get(process, 0) + 1
                lanes[process, tid] = THREAD_LANE_BASE + used[process] - 1
        return cls(trace_pids(recording.processes()), lanes)

    def pid(self, process: Process) -> int:
        return self.pids[process]

    def tid(self, process: Process, tid: int) -> int:
        return self.lanes.get((process, tid), tid)


def trace_pids(processes: Iterable[Process]) -> Dict[Process, int]:
    """Each process's pid in the trace: its own, unless a process of another host already has it."""
    pids: Dict[Process, int] = {}
    taken: Set[int] = set()
    for process in sorted(processes):
        pid = process.pid
        while pid in taken:
            pid = max(taken) + 1
        taken.add(pid)
        pids[process] = pid
    return pids


def _args(domain: str, rid: str, attrs: str) -> Dict[str, Any]:
    return {"domain": domain, "rid": parse_rid(rid), "attrs": parse_attrs(attrs)}


def _category(domain: str) -> Dict[str, str]:
    return {"cat": domain} if domain else {}


def _kernel_lane(device: int, stream: int) -> int:
    return KERNEL_LANE_BASE + device * 1000 + stream


def _thread_name(pid: int, tid: int, name: str) -> Dict[str, Any]:
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def _metadata(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    for process, pid in ids.pids.items():
        yield {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process.label}}
    for (process, tid), lane in ids.lanes.items():
        yield _thread_name(ids.pid(process), lane, f"thread {tid}")
    for process, device, stream in sorted({(k.process, k.device, k.stream) for k in recording.kernel}):
        yield _thread_name(ids.pid(process), _kernel_lane(device, stream), f"device {device} stream {stream}")


def _complete(
    name: str, category: Dict[str, str], start_ns: int, end_ns: int, where: Tuple[int, int], args: Any
) -> Dict[str, Any]:
    """A slice (``X``) on thread *where* (pid, tid); one that ends before it starts lasts 0."""
    pid, tid = where
    ts, dur = _us(start_ns), _us(max(end_ns - start_ns, 0))
    return {"ph": "X", "name": name, **category, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def _slices(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    for s in recording.spans:
        where = (ids.pid(s.process), ids.tid(s.process, s.tid))
        yield _complete(
            s.name, _category(s.domain), s.start_ns, s.end_ns, where, _args(s.domain, s.rid, s.attrs)
        )
    for e in recording.events:
        yield {
            "ph": "i",
            "s": "t",
            "name": e.name,
            **_category(e.domain),
            "ts": _us(e.ts_ns),
            "pid": ids.pid(e.process),
            "tid": ids.tid(e.process, e.tid),
            "args": _args(e.domain, e.rid, e.attrs),
        }


def _counters(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    """One counter track per process and metric (and scope, other than a request's): ``inc`` rows add."""
    series: Dict[Tuple[Process, str, str], float] = {}
    for m in sorted(recording.metrics, key=lambda m: m.ts_ns):
        scope = "" if m.scope in ("", "req") else m.scope
        key = (m.process, m.name, scope)
        series[key] = value = after(series.get(key, 0.0), m)
        if not math.isfinite(value):
            continue  # NaN and Infinity are not JSON: metric.csv has them
        yield {
            "ph": "C",
            "name": m.name,
            **_category(m.domain),
            "ts": _us(m.ts_ns),
            "pid": ids.pid(m.process),
            "args": {f"{m.name} ({scope})" if scope else m.name: value},
        }


def _operators(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    for a in recording.api:
        where = (ids.pid(a.process), ids.tid(a.process, a.tid))
        yield _complete(
            a.name, {"cat": "api"}, a.start_ns, a.end_ns, where, {"correlation_id": a.correlation_id}
        )
    for k in recording.kernel:
        where = (ids.pid(k.process), _kernel_lane(k.device, k.stream))
        args = {"type": k.type, "device": k.device, "stream": k.stream, "correlation_id": k.correlation_id}
        yield _complete(k.name, {"cat": "kernel"}, k.start_ns, k.end_ns, where, args)


def _flows(recording: Recording, ids: TraceIds) -> Iterator[Dict[str, Any]]:
    """Each request id's spans and events in time order, across processes, joined by one flow: it starts
    at the first (``s``), steps through the others (``t``) and ends at the last (``f``), each bound to the
    slice or instant that begins there (written after them: Perfetto binds a flow event to the slice
    on top of its thread's stack, and keeps the file's order among equal timestamps)."""
    stops: Dict[str, List[Tuple[int, int, int]]] = {}

    def stop(rid: str, ts_ns: int, process: Process, tid: int) -> None:
        if single(rid):
            stops.setdefault(rid, []).append((ts_ns, ids.pid(process), ids.tid(process, tid)))

    for span in recording.spans:
        stop(span.rid, span.start_ns, span.process, span.tid)
    for event in recording.events:
        stop(event.rid, event.ts_ns, event.process, event.tid)
    flow_id = 0
    for rid, points in stops.items():
        if len(points) < 2:
            continue
        flow_id += 1
        points.sort()
        for i, (ts_ns, pid, tid) in enumerate(points):
            phase = "s" if i == 0 else "f" if i == len(points) - 1 else "t"
            flow = {"ph": phase, "id": flow_id, "name": rid, "cat": "request", "ts": _us(ts_ns)}
            yield {**flow, "pid": pid, "tid": tid, **({} if phase == "s" else {"bp": "e"})}


def trace_events(recording: Recording) -> Iterator[Dict[str, Any]]:
    ids = TraceIds.of(recording)
    for part in (_metadata, _slices, _counters, _operators, _flows):
        yield from part(recording, ids)


def write_chrome(recording: Recording, path: Path) -> None:
    """``{"traceEvents": [...], "displayTimeUnit": "ms"}``, one event a line, written as generated."""
    encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode  # one for every event
    with replacing(path) as temp, temp.open("w", encoding="utf-8") as out:
        out.write('{"traceEvents": [\n')
        for i, event in enumerate(trace_events(recording)):
            out.write(",\n" if i else "")
            out.write(encode(event))
        out.write('\n], "displayTimeUnit": "ms"}\n')
