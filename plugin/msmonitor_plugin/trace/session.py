"""One trace in one process: accepted on the link thread, started and stopped at step boundaries on
the training thread, written on a thread of its own. Every phase change is reported to the daemon.

Steps are numbered from 0: step k is the work between the k-th and (k+1)-th boundary, and the counter
holds the number of the step now running. ``--start-step S --iterations N`` starts the profiler at the
boundary that begins step S and stops it at the one that begins step S+N.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Deque, Optional, Tuple

from .. import wire
from ..configtext import ConfigTextError
from ..steps import StepCounter
from ..vocabulary import TracePhase
from .recorders import Recorder, recorder_for
from .spec import TraceSpec, parse

log = logging.getLogger("msmonitor_plugin")

Report = Callable[[wire.TraceEvent], None]
RecorderFactory = Callable[[TraceSpec], Recorder]


class TraceSession:
    def __init__(
        self,
        spec: TraceSpec,
        counter: StepCounter,
        report: Report,
        on_done: Callable[[], None],
        recorder_factory: RecorderFactory = recorder_for,
    ) -> None:
        self.spec = spec
        self.phase = TracePhase.READY
        self.start_step = -1
        self.stop_step = -1
        self._counter = counter
        self._report = report
        self._on_done = on_done
        self._recorder_factory = recorder_factory
        self._recorder: Optional[Recorder] = None
        self._stop_at_ms = 0.0

    # --- link thread ------------------------------------------------------------------------------

    def arm(self) -> None:
        """Work out when to start; refuse a start step that has already begun; wait for it."""
        current = self._counter.count
        if self.spec.step_based:
            self.start_step = self._first_step(current)
            if self.start_step <= current:
                return self._fail(
                    f"start step {self.start_step} has already begun (the process is at step {current}); "
                    "choose a later step or -1 for the next one"
                )
            self.stop_step = self.start_step + self.spec.iterations
        self._emit()
        self._counter.pending = self.on_boundary

    @property
    def _explicit_start(self) -> bool:
        return not self.spec.start_roundup and self.spec.start_step is not None and self.spec.start_step >= 0

    def _first_step(self, current: int) -> int:
        spec = self.spec
        if spec.start_roundup:  # Kineto: the next multiple of the roundup
            return (current // spec.start_roundup + 1) * spec.start_roundup
        return current + 1 if spec.start_step is None or spec.start_step < 0 else spec.start_step

    # --- training thread --------------------------------------------------------------------------

    def on_boundary(self, count: int) -> None:
        """Called at each step boundary while this trace is pending; never raises."""
        try:
            if self.phase == TracePhase.READY:
                self._maybe_start(count)
            elif self.phase == TracePhase.RUNNING:
                self._advance(count)
        except Exception as exc:
            log.exception("trace %s failed", self.spec.trace_id)
            self._counter.pending = None
            self._fail(f"{type(exc).__name__}: {exc}")

    def _maybe_start(self, count: int) -> None:
        if self.spec.step_based:
            if count < self.start_step:
                return
            if count > self.start_step:
                # A boundary slipped past while the trace was being armed (on another thread).
                if self._explicit_start:
                    self._counter.pending = None
                    return self._fail(
                        f"start step {self.start_step} passed before the trace could start (now {count})"
                    )
                # "-1, the next step" and Kineto's roundup are relative: recompute from this boundary.
                self.start_step = self._first_step(count - 1)
                self.stop_step = self.start_step + self.spec.iterations
                if count < self.start_step:
                    return
        elif time.time() * 1000 < self.spec.start_time_ms:
            return
        self._recorder = self._recorder_factory(self.spec)
        self._recorder.start(first_step=count)
        self.start_step = count
        if not self.spec.step_based:
            self._stop_at_ms = max(time.time() * 1000, self.spec.start_time_ms) + self.spec.duration_ms
        self.phase = TracePhase.RUNNING
        self._emit(count)

    def _advance(self, count: int) -> None:
        assert self._recorder is not None
        done = count >= self.stop_step if self.spec.step_based else time.time() * 1000 >= self._stop_at_ms
        if not done:
            self._recorder.step()
            return
        self._counter.pending = None
        self._recorder.stop()
        self.stop_step = count
        threading.Thread(target=self._write, name="msmonitor-trace-writer", daemon=True).start()

    # --- writer thread ----------------------------------------------------------------------------

    def _write(self) -> None:
        assert self._recorder is not None
        try:
            files = self._recorder.write()
        except Exception as exc:
            log.exception("writing trace %s failed", self.spec.trace_id)
            return self._fail(f"writing the trace failed: {type(exc).__name__}: {exc}")
        self.phase = TracePhase.FINISHED
        self._emit(files=files)
        self._on_done()

    # --- any thread -------------------------------------------------------------------------------

    def abort(self, why: str) -> None:
        if not self.phase.final:
            self._counter.pending = None
            self._fail(why)

    def _fail(self, error: str) -> None:
        self.phase = TracePhase.FAILED
        self._emit(error=error)
        self._on_done()

    def _emit(self, current: Optional[int] = None, files: Optional[list] = None, error: str = "") -> None:
        recorder = self._recorder
        self._report(
            wire.TraceEvent(
                trace_id=self.spec.trace_id,
                phase=self.phase,
                current_step=self._counter.count if current is None else current,
                start_step=self.start_step,
                stop_step=self.stop_step,
                output=recorder.output if recorder is not None else "",
                files=list(files or []),
                error=error,
                warnings=list(recorder.warnings) if recorder is not None else [],
            )
        )


class Tracer:
    """Holds this process's one trace at a time, and takes trace commands from the daemon."""

    def __init__(
        self, counter: StepCounter, report: Report, recorder_factory: RecorderFactory = recorder_for
    ) -> None:
        self._counter = counter
        self._report = report
        self._recorder_factory = recorder_factory
        self._lock = threading.Lock()
        self.session: Optional[TraceSession] = None
        self._seen: Deque[str] = collections.deque(maxlen=32)  # ids taken, so a repeated push is ignored

    def accept(self, command: wire.Command) -> None:
        with self._lock:
            active = self.session
            if command.trace_id in self._seen:
                return  # a repeated push of a trace we took
            if active is not None:
                return self._report(
                    wire.TraceEvent(
                        trace_id=command.trace_id,
                        phase=TracePhase.FAILED,
                        error=f"busy with trace {active.spec.trace_id}",
                    )
                )
            try:
                spec = parse(command)
            except ConfigTextError as exc:
                return self._report(
                    wire.TraceEvent(trace_id=command.trace_id, phase=TracePhase.FAILED, error=str(exc))
                )
            self._seen.append(command.trace_id)
            self.session = TraceSession(spec, self._counter, self._report, self._done, self._recorder_factory)
            self.session.arm()

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

    def _done(self) -> None:
        self.session = None
