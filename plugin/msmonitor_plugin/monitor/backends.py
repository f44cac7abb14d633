"""Where records come from (backends) and where they go (the :class:`Collector`).

Backend choice at run time (:func:`select_backend`): MSPTI when ``libmspti.so`` loads, else PyTorch when
the process has imported torch, else none (every kind unavailable). All backends share one small
interface (:class:`Backend`) driven by the engine's monitor thread, and deliver to a Collector: in
metric mode into the interval's :class:`~.aggregate.Aggregator`, in ``--log-file`` mode to a
:class:`~.writers.WriterThread`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
from typing import Dict, FrozenSet, List, Mapping, Optional, Protocol, Sequence, Tuple

from msmonitor_contract.activity import Kind

from ..identity import imported
from ..steps import AtNextStep
from .aggregate import Aggregator, Row
from .buffer_parser import BufferParser, BufferResult
from .filters import KEEP_ALL, Filter
from .layouts import NameTable, WalkError, stride_offsets
from .mspti import MsptiError, MsptiLibrary, MsptiSession, load_library, result_name
from .records import Record
from .writers import WriterThread

log = logging.getLogger("msmonitor_plugin")

NO_BACKEND_REASON = "no backend: libmspti.so is not loadable and this process has not imported torch"
PRELOAD_REASON = "MSPTI refuses this kind without LD_PRELOAD=libmspti.so (CANN < 9.0)"


class Collector:
    """The sink every backend writes to; its filter can be replaced while monitoring runs."""

    def __init__(
        self, aggregator: Aggregator, writer: Optional[WriterThread] = None, flt: Filter = KEEP_ALL
    ) -> None:
        self.aggregator = aggregator
        self.writer = writer
        self.filter = flt

    @property
    def wants_records(self) -> bool:
        return self.writer is not None

    def add_records(self, records: Sequence[Record], filtered: bool = False) -> None:
        """Records from a backend; *filtered* when the backend already applied :attr:`filter`."""
        if not filtered and self.filter.active:
            kept = [r for r in records if self.filter.keeps(r.kind, r.name)]
            self.aggregator.count("filtered", len(records) - len(kept))
            records = kept
        if self.writer is not None:
            self.writer.put(list(records))
        else:
            self.aggregator.add_many(records)

    def add_rows(self, rows: List[Row]) -> None:
        self.aggregator.merge(rows)

    def drop(self, reason: str, count: int = 1) -> None:
        self.aggregator.drop(reason, count)

    def count(self, counter: str, n: int = 1) -> None:
        self.aggregator.count(counter, n)


class Backend(Protocol):
    """What the engine drives, always from its monitor thread (except construction)."""

    name: str
    # The host's own work is the device's (torch on a CPU-only machine): a host range is a device range.
    host_is_device: bool

    def start(self, collector: Collector, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        """Start collecting *kinds*; returns the requested kinds it cannot provide, with the reason."""

    def set_kinds(self, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        """Replace the collected kinds (same return as :meth:`start`)."""

    def begin_interval(self, now: float, interval_s: float) -> None:
        """A report interval starts (monotonic *now*)."""

    def poll(self, now: float) -> Optional[float]:
        """Work due by *now*; returns the monotonic time it wants the next poll (None: no need)."""

    def flush(self) -> None:
        """Deliver everything collected so far, before a report is taken."""

    def take_sampled_ns(self) -> Optional[int]:
        """How long the backend observed since the last call; None: all the time."""

    def stop(self) -> None:
        """Stop collecting; data still held is delivered first."""


class StrideCheck:
    """Decides, per buffer, whether to stride over records or ask ``msptiActivityGetNextRecord``.

    MSPTI documents its walk as the only way through a buffer. Asking it costs a ctypes call per record
    (several hundred ns), so in ``auto`` mode the binding walks a buffer with MSPTI's function first,
    compares the offsets with a stride walk over the C ``sizeof`` of each kind, and from then on strides
    over buffers whose kinds all were confirmed; every ``audit_every``-th buffer is checked again. One
    mismatch (a library whose records are larger than the documented structs) turns striding off for good.
    ``MSMONITOR_MSPTI_WALK=next`` always asks MSPTI; ``stride`` never does (benchmarks).
    """

    def __init__(self, mode: str = "auto", audit_every: int = 64) -> None:
        self.mode = mode if mode in ("auto", "next", "stride") else "auto"
        self.audit_every = audit_every
        self.verified: FrozenSet[int] = frozenset()
        self.disabled = ""
        self.audits = 0
        self._buffers = 0

    def use_strides(self) -> bool:
        if self.mode != "auto":
            return self.mode == "stride"
        if self.disabled or not self.verified:
            return False
        self._buffers += 1
        return self._buffers % self.audit_every != 0

    @property
    def allowed(self) -> Optional[FrozenSet[int]]:
        return None if self.mode == "stride" else self.verified

    def learn(self, view: memoryview, valid: int, offsets: Sequence[int]) -> None:
        """Compare MSPTI's walk of a buffer with the stride walk; confirm or disable striding."""
        if self.mode != "auto" or self.disabled:
            return
        self.audits += 1
        try:
            mine: Optional[List[int]] = stride_offsets(view, valid)
        except WalkError as exc:
            mine = None
            reason = str(exc)
        if mine == list(offsets):
            kinds = {struct.unpack_from("=i", view, off)[0] for off in offsets}
            self.verified = self.verified | frozenset(kinds)
            return
        if mine is not None:
            first = next(i for i, (a, b) in enumerate(zip(mine, offsets)) if a != b) if mine else 0
            reason = f"record {first} is at offset {offsets[first] if first < len(offsets) else '?'}"
        self.disabled = reason
        log.warning("MSPTI records are not where their documented sizes put them (%s): walking with "
                    "msptiActivityGetNextRecord only", reason)  # fmt: skip


class MsptiBackend:
    """MSPTI activity records, parsed inside the complete callback, aggregated or written."""

    name = "mspti"
    host_is_device = False

    def __init__(self, lib: MsptiLibrary, env: Mapping[str, str] = os.environ) -> None:
        self.lib = lib
        self.check = StrideCheck(env.get("MSMONITOR_MSPTI_WALK", "auto"))
        self.parser = BufferParser()
        self.collector: Optional[Collector] = None
        self.session: Optional[MsptiSession] = None
        self.kinds: FrozenSet[Kind] = frozenset()
        self._declined_seen = lib.pool.declined
        self._unmatched_seen = 0
        self._errors_seen = lib.callback_errors

    def start(self, collector: Collector, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        self.collector = collector
        self.parser = BufferParser()
        self._unmatched_seen = 0
        self.session = MsptiSession(self.lib, self._on_buffer)
        self.session.start()
        return self.set_kinds(kinds)

    def set_kinds(self, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        assert self.session is not None
        unavailable: Dict[Kind, str] = {}
        for kind in sorted(self.kinds - kinds):
            self.session.disable(kind)
        for kind in sorted(kinds - self.kinds):
            result = self.session.enable(kind)
            if result != 0:
                unavailable[kind] = (
                    PRELOAD_REASON if result == 6 else f"msptiActivityEnable: {result_name(result)}"
                )
            elif kind == Kind.MARKER:
                self.session.disable_marker_domain("communication")  # as msMonitor: HCCL's own markers
        self.kinds = frozenset(k for k in kinds if k not in unavailable)
        return unavailable

    def begin_interval(self, now: float, interval_s: float) -> None:
        pass

    def poll(self, now: float) -> Optional[float]:
        return None

    def flush(self) -> None:
        if self.session is not None:
            self.session.flush()
        self._count_losses()

    def take_sampled_ns(self) -> Optional[int]:
        return None

    def stop(self) -> None:
        if self.session is None:
            return
        for kind in sorted(self.kinds):
            self.session.disable(kind)
        self.session.close()  # flushes first
        self._count_losses()
        self.session = None
        self.kinds = frozenset()

    def _count_losses(self) -> None:
        collector = self.collector
        if collector is None:
            return
        declined, self._declined_seen = self.lib.pool.declined - self._declined_seen, self.lib.pool.declined
        collector.drop("buffer_requests_declined", declined)
        unmatched = self.parser.pairer.unmatched
        collector.drop("marker_unmatched", unmatched - self._unmatched_seen)
        self._unmatched_seen = unmatched
        errors, self._errors_seen = self.lib.callback_errors - self._errors_seen, self.lib.callback_errors
        collector.drop("callback_errors", errors)

    def _on_buffer(self, view: memoryview, addr: int, valid: int) -> None:
        collector = self.collector
        if collector is None:
            return
        self.parser.records = collector.wants_records
        self.parser.filter = collector.filter
        names = NameTable(ctypes.string_at)
        result = self._parse(view, addr, valid, names)
        collector.add_rows(result.rows)
        collector.add_records(result.records, filtered=True)
        for counter, n in result.counts.items():
            collector.count(counter, n)

    def _parse(self, view: memoryview, addr: int, valid: int, names: NameTable) -> BufferResult:
        if self.check.use_strides():
            try:
                return self.parser.parse(view, valid, names, allowed=self.check.allowed)
            except WalkError:
                pass  # a kind not yet confirmed: ask MSPTI below
        offsets = self.lib.record_offsets(addr, valid)
        self.check.learn(view, valid, offsets)
        return self.parser.parse(view, valid, names, offsets=offsets)


class NoBackend:
    """Nothing to collect with: every requested kind is reported unavailable."""

    name = "none"
    host_is_device = False

    def __init__(self, reason: str = NO_BACKEND_REASON) -> None:
        self.reason = reason

    def start(self, collector: Collector, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        return self.set_kinds(kinds)

    def set_kinds(self, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        return {k: self.reason for k in kinds}

    def begin_interval(self, now: float, interval_s: float) -> None:
        pass

    def poll(self, now: float) -> Optional[float]:
        return None

    def flush(self) -> None:
        pass

    def take_sampled_ns(self) -> Optional[int]:
        return 0

    def stop(self) -> None:
        pass


def select_backend(
    env: Mapping[str, str] = os.environ, at_next_step: Optional[AtNextStep] = None
) -> Tuple[Backend, List[str]]:
    """MSPTI, else torch (only if already imported), else none; plus why the better ones were not taken.

    *at_next_step* lets the torch backend open its first window on the training thread."""
    notes: List[str] = []
    try:
        return MsptiBackend(load_library(env=env), env), notes
    except MsptiError as exc:
        notes.append(str(exc))
    torch = imported("torch")
    if torch is None:
        notes.append("torch is not imported by this process")
        return NoBackend(), notes
    from .torch_backend import TorchBackend, TorchUnavailable

    try:
        return TorchBackend(torch, env, at_next_step), notes
    except TorchUnavailable as exc:
        notes.append(str(exc))
        return NoBackend(f"no backend: {exc}"), notes


__all__ = [
    "Backend",
    "Collector",
    "MsptiBackend",
    "NoBackend",
    "StrideCheck",
    "select_backend",
]
