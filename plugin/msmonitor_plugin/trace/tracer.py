"""This process's traces, one at a time: trace commands from the daemon (and dynamic windows' starts and
stops) taken, refused or passed to the :class:`~.session.TraceSession` that runs the trace.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Deque, Optional, Sequence, Tuple

from msmonitor_contract import wire
from msmonitor_contract.configtext import ConfigTextError
from msmonitor_contract.vocabulary import TracePhase, trace_holder

from ..kinds.base import TraceSpec
from ..slot import ProfilerSlot
from ..steps import StepCounter
from .recorders import check_output, recorder_for
from .session import RecorderFactory, Recording, Report, TraceSession
from .spec import is_stop, parse


class Tracer:
    """Holds this process's one trace at a time, and takes trace commands from the daemon."""

    def __init__(
        self,
        counter: StepCounter,
        report: Report,
        recorder_factory: RecorderFactory = recorder_for,
        slot: Optional[ProfilerSlot] = None,
        roots: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        self._counter = counter
        self._report = report
        # The folder check goes with the real recorders; a test's stand-in recorder writes nowhere. It
        # confines the folder to the daemon's --trace-root directories (*roots*: its latest hello reply).
        self._roots = roots
        check = self._check_output if recorder_factory is recorder_for else None
        self._recording = Recording(recorder_factory, check)
        self._slot = slot if slot is not None else ProfilerSlot()
        self._lock = threading.Lock()
        self.session: Optional[TraceSession] = None
        self._seen: Deque[str] = collections.deque(maxlen=32)  # ids taken, so a repeated push is ignored

    def accept(self, command: wire.Command) -> None:
        """A trace command, or a dynamic window's start or stop."""
        try:
            stopping = is_stop(command)
        except ConfigTextError as exc:
            return self._refuse(command.trace_id, str(exc))
        if stopping:
            return self.stop(command.trace_id)
        with self._lock:
            active = self.session
            if command.trace_id in self._seen:
                return  # a repeated push of a trace we took
            if active is not None:
                return self._refuse(command.trace_id, f"busy with trace {active.spec.trace_id}")
            try:
                spec = parse(command)
            except ConfigTextError as exc:
                return self._refuse(command.trace_id, str(exc))
            # Claimed from ready to finished or failed, not only while recording: a trace waiting for its
            # step keeps npu-monitor from taking the profiler it will need, as the daemon has always had it.
            owner = trace_holder(spec.kind, spec.trace_id)
            holder = self._slot.claim(owner)
            if holder is not None:
                return self._refuse(
                    command.trace_id, f"refused: {holder} runs in this process (one profiler at a time)"
                )
            self._seen.append(command.trace_id)
            session = TraceSession(
                spec, self._counter, self._report, lambda: self._done(session, owner), self._recording
            )
            self.session = session
            session.arm()

    def _check_output(self, spec: TraceSpec) -> None:
        check_output(spec, self._roots())

    def stop(self, trace_id: str) -> None:
        """Stop the window or trace *trace_id*; a stop for any other says there is no such trace here."""
        session = self.session
        if session is not None and session.spec.trace_id == trace_id:
            return session.request_stop()
        if trace_id not in self._seen:
            self._refuse(trace_id, "no such trace runs in this process")

    def _refuse(self, trace_id: str, error: str) -> None:
        self._report(wire.TraceEvent(trace_id=trace_id, phase=TracePhase.FAILED, error=error))

    def state(self) -> Tuple[str, str]:
        """(trace id, phase) for the heartbeat; ("", "") when idle."""
        session = self.session
        if session is None or session.phase.final:
            return "", ""
        return session.spec.trace_id, session.phase

    def abort(self, why: str) -> None:
        session = self.session
        if session is not None:
            session.abort(why)

    def _done(self, session: TraceSession, owner: str) -> None:
        """*session* finished or failed: free the tracer and the profiler slot (once, and only for it)."""
        if self.session is session:
            self.session = None
            self._slot.release(owner)
