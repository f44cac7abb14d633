"""``ms_service_profiler.mstx.service_profiler``: the entry points of MindIE's C library
(``libms_service_profiler.so``) that its Python ``Profiler`` and framework hooks call, over this plugin's
recording. A span handle is its start time in nanoseconds."""

from __future__ import annotations

import json
import time
from typing import Any, Dict, Optional, Tuple, Union

from . import api


def _named(msg: str) -> Tuple[str, str, Union[str, Dict[str, Any]]]:
    """MindIE 8.3's message (name and domain inside it) as (name, domain, the rest)."""
    try:
        attrs = json.loads(msg)
    except ValueError:
        return "", "", msg
    if not isinstance(attrs, dict):
        return "", "", msg
    return str(attrs.pop("name", "")), str(attrs.pop("domain", "")), attrs


class ServiceProfilerLib:
    def is_enable(self, profiler_level: Union[int, str]) -> bool:
        recording = api.active()
        return recording is not None and recording.records(profiler_level)

    def is_domain_enable(self, domain_name: str) -> bool:
        recording = api.active()
        return recording is not None and recording.records_domain(domain_name)

    def start_span(self, name: Optional[str] = None) -> int:
        return time.time_ns()

    def end_span(self, span_handle: int) -> None:
        """Nothing: the span was written by mark_span_attr, as in MindIE."""

    def span_end_ex(self, name: str, domain: str, msg: str, span_handle: int) -> None:
        api.put_slice(name, domain, span_handle, time.time_ns(), msg)

    def mark_event_ex(self, name: str, domain: str, msg: str) -> None:
        now = time.time_ns()
        api.put_slice(name, domain, now, now, msg)

    def mark_span_attr(self, msg: str, span_handle: int) -> None:
        name, domain, rest = _named(msg)
        api.put_slice(name, domain, span_handle, time.time_ns(), rest)

    def mark_event(self, msg: str) -> None:
        name, domain, rest = _named(msg)
        now = time.time_ns()
        api.put_slice(name, domain, now, now, rest)

    def add_meta_info(self, key: str, value: Any) -> None:
        api.put_meta(key, value)

    def set_profiler_current_step(self, step: int) -> None:
        api.prof_step()


service_profiler = ServiceProfilerLib()
