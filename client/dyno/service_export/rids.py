"""Request ids as MindIE's analyser reads them (processor_meta.py, processor_res.py, 26.0): a number, or
text that is one, becomes its integer as text (``7``, ``7.0`` and ``"007"`` are all request ``"7"``); and
a link mark (``{"type": 3, "from": F, "to": T}``: the service's id T for the request F) renames T to F in
the marks of the process that recorded it, and in those of its forward (model-executing) processes: a
process with a ``forward`` span takes its parent's links (``ppid`` in its meta, on its host), or, with
no parent recorded, every process's links — unless every linked id is a number, since numeric ids of
separate processes repeat. The links of the other processes are then left out of the recording, as
the analyser leaves them out."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional

from .model import LINK, Iterations, Mark, Process, Recording

Links = Dict[str, Any]  # the service's id -> the request's


def numeric(rid: Any) -> bool:
    try:
        int(rid)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def formatted(rid: Any) -> Any:
    return str(int(rid)) if numeric(rid) else rid


def renamed(rid: Any, links: Mapping[str, Any]) -> Any:
    """A mark's ``rid`` with each id formatted and linked: a batch's list item by item, a ``{"rid": ...}``
    member by its id."""
    if isinstance(rid, list):
        return [renamed(item, links) for item in rid]
    if isinstance(rid, dict):
        return {**rid, "rid": renamed(rid["rid"], links)} if "rid" in rid else rid
    rid = formatted(rid)
    return links.get(rid, rid)


def _links(marks: List[Mark]) -> Links:
    return {
        formatted(m.attrs["to"]): formatted(m.attrs["from"])
        for m in marks
        if m.kind == LINK and "from" in m.attrs and "to" in m.attrs
    }


def _parent(process: Process, meta: Mapping[str, str], by_process: Dict[Process, Links]) -> Optional[Links]:
    """The links of the process's parent, if it recorded (its ``ppid`` meta, on its host)."""
    ppid = meta.get("ppid", "")
    found = (links for p, links in by_process.items() if p.host == process.host and str(p.pid) == ppid)
    return next(found, None)


def _relinked(marks: List[Mark], links: Links) -> List[Mark]:
    """The marks with their ids linked, each batch's members numbered again (iterations count per id)."""
    iterations = Iterations()
    out = []
    for m in marks:
        if "rid" in m.attrs:
            rid = renamed(m.attrs["rid"], links)
            m = dataclasses.replace(m, attrs={**m.attrs, "rid": rid}, members=iterations.members(rid))
        out.append(m)
    return out


def link_requests(recording: Recording) -> Recording:
    """The recording with the links applied (itself where it has none)."""
    by_prof: Dict[str, List[Mark]] = {}
    for m in recording.marks:
        by_prof.setdefault(m.prof_id, []).append(m)
    links = {prof: _links(marks) for prof, marks in by_prof.items()}
    if not any(links.values()):
        return recording
    by_process = {marks[0].process: links[prof] for prof, marks in by_prof.items()}
    every = {to: rid for found in links.values() for to, rid in found.items()}
    if all(map(numeric, every)):
        every = {}
    marks: List[Mark] = []
    for prof, mine in by_prof.items():
        process = mine[0].process
        if any(m.name == "forward" for m in mine):
            parent = _parent(process, recording.meta.get(process, {}), by_process)
            marks += _relinked(mine, every if parent is None else parent)
        else:
            marks += [m for m in _relinked(mine, links[prof]) if not (m.kind == LINK and "from" in m.attrs)]
    return dataclasses.replace(recording, marks=marks)
