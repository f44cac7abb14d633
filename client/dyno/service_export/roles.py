"""Batch types corrected by the node's role in prefill/decode disaggregation, as MindIE's analyser corrects
them (plugin_trace.fix_batch_type, 26.0). A process that marks ``prefillRes`` is a prefill node and one
that marks ``decodeRes`` a decode node; a batch whose type (given, or from its members' iterations)
disagrees with its node's role was judged from a partial view: on a prefill node it is ``Other``; on a
decode node, for each request, only its last such batch (of each span name) counts as ``Decode``, and a
batch is ``Decode`` if it is that last one for any of its requests, else ``Other``. Recordings with
MindIE's own ``batchType`` are exact and left as they are, as are processes with no role."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Set, Tuple

from .analysis import batch_type
from .model import Mark, Process, Recording

ROLES = {"prefillRes": "Prefill", "decodeRes": "Decode"}  # the role's mark -> the type its batches have


def _roles(recording: Recording) -> Dict[Process, str]:
    return {m.process: ROLES[m.name] for m in recording.marks if m.name in ROLES}


def _decode_lasts(conflicting: List[Tuple[int, Mark]]) -> Set[int]:
    """The conflicting batches of decode nodes that are some request's last of their process and name."""
    last: Dict[Tuple[Process, str, str], int] = {}
    for index, m in conflicting:
        for rid in m.request_ids:
            last[m.process, m.name, rid] = index
    return set(last.values())


def correct_batch_types(recording: Recording) -> Recording:
    """The recording with each conflicting batch's ``batch_type`` corrected (itself where none is)."""
    roles = _roles(recording)
    if not roles or any("batchType" in m.attrs for m in recording.marks):
        return recording
    conflicting = [
        (i, m)
        for i, m in enumerate(recording.marks)
        if m.process in roles and batch_type(m) not in ("", roles[m.process])
    ]
    if not conflicting:
        return recording
    lasts = _decode_lasts([(i, m) for i, m in conflicting if roles[m.process] == "Decode"])
    marks = list(recording.marks)
    for i, m in conflicting:
        corrected = "Decode" if i in lasts else "Other"
        marks[i] = dataclasses.replace(m, attrs={**m.attrs, "batch_type": corrected})
    return dataclasses.replace(recording, marks=marks)
