"""``--format json``: ``chrome_tracing.json`` as MindIE's analyser draws it (a JSON list of trace events,
for MindStudio Insight, Perfetto or chrome://tracing): each process named by its role (``schedule``,
``forward``) and labelled with its host and data-parallel rank, its marks on tracks named
``<domain>(<tid>)`` (MindIE's thread naming; one ``Request`` and one ``KVCache`` track a process), spans
as ``X`` and events as ``I`` (duration 0) with flat args (the message's attributes, ``start_datetime``,
``end_datetime``, ``tid``, ``res_list``), KV-cache blocks and the recording's counters as ``C``,
operators on Api and Kernel tracks, and one flow per request id (``flow_<rid>``, ``s``/``t``/``f``)
through every mark that carries it, batch spans included. Times are microseconds."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Sequence, Set, Tuple, Union

from msmonitor_contract.files import replacing
from msmonitor_contract.numbers import strict_int

from ..analysis import dp_ranks, flow_phase, request_paths
from ..model import SPAN, Api, Kernel, Mark, Process, Recording
from ..units import us, when

Event = Dict[str, Any]


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


UNSPLIT = ("Request", "RequestState", "KVCache", "Schedule.KVCache")  # one track per process, not per thread
RENAMED = {"PDSplit": "PDCommunication"}


def track(mark: Mark) -> str:
    """The analyser's track: ``<domain>(<tid>)``, but one track of a process for its request and KV-cache
    domains."""
    domain = RENAMED.get(mark.domain, mark.domain)
    if domain in UNSPLIT:
        return domain
    return f"{domain}({mark.tid})" if domain else str(mark.tid)


ROLES = (("Engine", "schedule"), ("Request", "schedule"), ("Execute", "forward"))  # domain part -> role
ROLE_ORDER = ("schedule", "forward")


def role(domain: str) -> str:
    return next((name for part, name in ROLES if part in domain), "")


@dataclass(frozen=True)
class TraceProcess:
    """A process as the analyser shows it: named by its role (the first of its marks whose domain says
    one: schedule for Engine or Request, forward for Execute), else by its pid; labelled with its host
    and data-parallel rank; schedulers first, then forward processes by rank."""

    pid: int
    name: str
    labels: str
    sort_index: int


def trace_processes(recording: Recording) -> Dict[Process, TraceProcess]:
    pids = trace_pids(recording.processes())
    roles: Dict[Process, str] = {}
    for m in recording.marks:
        if role(m.domain):
            roles.setdefault(m.process, role(m.domain))
    ranks = first_per_rank(dp_ranks(recording))

    def order(p: Process) -> Tuple[int, int, int]:
        kind = roles.get(p, "")
        return (ROLE_ORDER.index(kind) if kind else len(ROLE_ORDER), int(ranks.get(p, 0)), pids[p])

    found = {}
    for index, p in enumerate(sorted(pids, key=order)):
        host = recording.meta.get(p, {}).get("hostname", p.host)
        labels = ",".join([host, *([f"dp{ranks[p]}"] if p in ranks else [])])
        found[p] = TraceProcess(pids[p], roles.get(p) or str(pids[p]), labels, index)
    return found


def first_per_rank(ranks: Dict[Process, Any]) -> Dict[Process, str]:
    """Each data-parallel rank's first process, with that rank: the one the analyser labels with it (-1
    is no rank)."""
    first: Dict[str, Process] = {}
    for p in sorted(ranks):
        rank = str(ranks[p])
        if strict_int(rank, negative=True) is not None and rank != "-1":
            first.setdefault(rank, p)
    return {p: rank for rank, p in first.items()}


def _metadata(recording: Recording, pids: Dict[Process, int]) -> Iterator[Event]:
    for p in trace_processes(recording).values():
        yield {"name": "process_sort_index", "ph": "M", "pid": p.pid, "args": {"sort_index": p.sort_index}}
        yield {"name": "process_name", "ph": "M", "pid": p.pid, "args": {"name": p.name}}
        yield {"name": "process_labels", "ph": "M", "pid": p.pid, "args": {"labels": p.labels}}
    tracks = sorted({(pids[m.process], track(m)) for m in _slices(recording)})
    for index, (pid, tid) in enumerate(tracks):
        yield {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": index}}


def _args(mark: Mark) -> Dict[str, Any]:
    """The message flat, as the analyser writes it, with its own additions."""
    return {
        **{k: _json_safe(v) for k, v in mark.attrs.items()},
        "start_datetime": when(mark.start_ns),
        "end_datetime": when(mark.end_ns),
        "tid": mark.tid,
        "res_list": mark.rid,
    }


def _json_safe(value: Any) -> Any:
    """NaN and Infinity (a metric may hold them) are not JSON: as words."""
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def _kv_blocks(mark: Mark) -> Dict[str, Any]:
    """The KV-cache blocks a mark reports (MindIE's deviceBlock, vLLM's KVCacheStatus), drawn as a counter
    instead of a slice, as the analyser draws them; none for other marks."""
    if mark.name == "KVCacheStatus":
        return {k: mark.metric(k) for k in ("total_blocks", "used_blocks", "free_blocks")}
    left = mark.metric("deviceBlock")
    return {} if left is None else {"Device Block": left}


def _slices(recording: Recording) -> List[Mark]:
    return [m for m in recording.marks if not _kv_blocks(m)]


def _marks(recording: Recording, pids: Dict[Process, int]) -> Iterator[Event]:
    for m in _slices(recording):
        spans = m.kind == SPAN or m.end_ns > m.start_ns
        yield {
            "name": m.name,
            "ph": "X" if spans else "I",
            "ts": us(m.start_ns),
            "dur": us(m.end_ns - m.start_ns),
            "pid": pids[m.process],
            "tid": track(m),
            **({"cat": m.domain} if m.domain else {}),
            "args": _args(m),
        }


def _counter(name: str, ts_ns: int, pid: int, values: Dict[str, Any]) -> Iterator[Event]:
    finite = {k: v for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    if finite:  # NaN and Infinity are not JSON
        yield {"name": name, "ph": "C", "ts": us(ts_ns), "pid": pid, "tid": name, "args": finite}


def _counters(recording: Recording, pids: Dict[Process, int]) -> Iterator[Event]:
    """KV-cache blocks (MindIE's deviceBlock, vLLM's KVCacheStatus) and the counter table's samples."""
    for m in recording.marks:
        yield from _counter("KVCache", m.start_ns, pids[m.process], _kv_blocks(m))
    for c in recording.counters:
        yield from _counter(c.name, c.ts_ns, pids[c.process], c.values)


def _complete(op: Union[Api, Kernel], pids: Dict[Process, int], tid: str, args: Dict[str, Any]) -> Event:
    return {"name": op.name, "ph": "X", "ts": us(op.start_ns), "dur": us(op.end_ns - op.start_ns),
            "pid": pids[op.process], "tid": tid, "args": args}  # fmt: skip


def _operators(recording: Recording, pids: Dict[Process, int]) -> Iterator[Event]:
    for a in recording.api:
        args: Dict[str, Any] = {"correlation_id": a.correlation_id, "tid": a.tid}
        yield _complete(a, pids, "Api", args)
    for k in recording.kernel:
        args = {"type": k.type, "device": k.device, "stream": k.stream, "correlation_id": k.correlation_id}
        lane = f"Kernel(device {k.device} stream {k.stream})"
        yield _complete(k, pids, lane, args)


def _flows(recording: Recording, pids: Dict[Process, int]) -> Iterator[Event]:
    for rid, path in request_paths(_slices(recording)).items():
        for i, m in enumerate(path):
            yield {"name": f"flow_{rid}", "ph": flow_phase(i, len(path)), "ts": us(m.start_ns), "id": rid,
                   "cat": rid, "pid": pids[m.process], "tid": track(m)}  # fmt: skip


def trace_events(recording: Recording) -> Iterator[Event]:
    pids = trace_pids(recording.processes())
    for part in (_metadata, _marks, _counters, _operators, _flows):
        yield from part(recording, pids)


def write_chrome(recording: Recording, path: Path, formats: Sequence[str]) -> None:
    """A JSON list, one event a line, written as generated."""
    encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=str).encode
    with replacing(path) as temp, temp.open("w", encoding="utf-8") as out:
        out.write("[\n")
        for i, event in enumerate(trace_events(recording)):
            out.write(",\n" if i else "")
            out.write(encode(event))
        out.write("\n]\n")
