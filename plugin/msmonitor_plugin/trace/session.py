"""One trace in one process: accepted on the link thread, started and stopped at step boundaries on
the training thread, written on a thread of its own. Every phase change is reported to the daemon.

Steps are numbered from 0: step k is the work between the k-th and (k+1)-th boundary, and the counter
holds the number of the step now running. ``--start-step S --iterations N`` starts the profiler at the
boundary that begins step S and stops it at the one that begins step S+N.

A ``dyno dynamic`` window runs until stopped: in a process that counts steps it starts and stops at the
next boundary, so it covers whole steps; in one that counts none (an inference server) it starts after
:data:`START_GRACE_S` and stops at once, off the training thread, recording every thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, List, NamedTuple, Optional

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import TracePhase

from .. import identity
from ..kinds.base import TraceSpec
from ..steps import StepCounter
from . import prof
from .recorder import Recorder, RecorderError, unwritable
from .recorders import recorder_for

log = logging.getLogger("msmonitor_plugin")

Report = Callable[[wire.TraceEvent], None]
RecorderFactory = Callable[[TraceSpec], Recorder]
# Raises RecorderError when a trace could not be written where it asks: checked when it is accepted.
OutputCheck = Callable[[TraceSpec], None]


class Recording(NamedTuple):
    """How a trace is recorded: the recorder for its spec, and the check of its folder when the trace is
    accepted (None: no check; a test's stand-in recorder writes nowhere)."""

    factory: RecorderFactory = recorder_for
    check: Optional[OutputCheck] = None


UNCHECKED = Recording()  # the real recorders, the folder left unchecked

# A window of a process that counts steps stops at the next boundary, or after this long between steps
# (a step that hangs must not keep the answer waiting).
STOP_GRACE_S = 3.0
# A window waits this long for the first boundary of a process that has counted none, then starts
# between steps (an inference server counts none; a job just launched soon will).
START_GRACE_S = 2.0
IMPORT_RETRY_S = 0.2
WRITE_AT_EXIT_S = 30.0  # how long the exiting process waits for a window being written


def _after(seconds: float, action: Callable[[], None]) -> None:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()


class TraceSession:
    """One trace, from its acceptance to the event that says it finished or failed."""

    def __init__(
        self,
        spec: TraceSpec,
        counter: StepCounter,
        report: Report,
        on_done: Callable[[], None],
        recording: Recording = UNCHECKED,
    ) -> None:
        self.spec = spec
        self.phase = TracePhase.READY
        self.start_step = -1
        self.stop_step = -1
        self._counter = counter
        self._report = report
        self._on_done = on_done
        self._recording = recording
        self._recorder: Optional[Recorder] = None
        self._stop_at_ms = 0.0
        # A window: whether it starts and stops at step boundaries, whether a stop was asked for, and
        # the times it covers.
        self._at_boundaries = True
        self._stop_requested = False
        self._started_at = self._stopped_at = 0.0
        self._lock = threading.Lock()  # start, stop and a cancelled start race between threads
        self._writer: Optional[threading.Thread] = None

    # --- link thread ------------------------------------------------------------------------------

    def arm(self) -> None:
        """Work out when to start; refuse a start step that has already begun, or a folder this process
        cannot write into (better now than after recording); wait for the start."""
        if self._recording.check is not None:
            try:
                self._recording.check(self.spec)
            except RecorderError as exc:
                return self._fail(str(exc))
        current = self._counter.count
        if self.spec.until_stopped:
            self.start_step = current + 1
            if current == 0:  # no step counted yet: a server never counts one; start anyway, soon
                _after(START_GRACE_S, self._start_between_steps)
        elif self.spec.step_based:
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

    def _start_between_steps(self) -> None:
        """No boundary came: start on this thread, recording every thread. Never while the process is
        importing a module: the profiler's first start imports hundreds, and two threads importing
        torch's modules at once can deadlock the job's own thread."""
        if self.phase != TracePhase.READY:
            return
        if identity.import_in_progress():
            return _after(IMPORT_RETRY_S, self._start_between_steps)
        self._safely(lambda: self._start(self._counter.count, at_boundary=False))

    def request_stop(self) -> None:
        """A window's stop command, or a trace's cancel: at the next boundary when it runs at boundaries,
        else at once; a trace still waiting for its start is dropped (nothing was recorded)."""
        with self._lock:
            if self.phase == TracePhase.READY:  # its first boundary has not come yet
                self._counter.pending = None
                return self._fail(self._stopped_before_start())
            if self.phase != TracePhase.RUNNING or self._stop_requested:
                return
            self._stop_requested = True
        if not self._at_boundaries:
            return self._safely(lambda: self._finish(self._counter.count + 1))
        _after(STOP_GRACE_S, self._stop_between_steps)

    def _stopped_before_start(self) -> str:
        if self.spec.until_stopped:
            return "stopped before the window began: no step boundary came since start"
        waiting = f"step {self.start_step}" if self.spec.step_based else "its start"
        at = self._counter.count
        return f"cancelled before it began (it waited for {waiting}; the process is at step {at})"

    def _stop_between_steps(self) -> None:
        self._safely(
            lambda: self._finish(
                self._counter.count + 1,
                note=f"no step boundary within {STOP_GRACE_S:g} s of stop: stopped during step "
                f"{self._counter.count}",
            )
        )

    def on_boundary(self, count: int) -> None:
        """Called at each step boundary while this trace is pending; never raises."""
        self._safely(lambda: self._on_boundary(count))

    def _on_boundary(self, count: int) -> None:
        if self.phase == TracePhase.READY:
            self._maybe_start(count)
        elif self.phase == TracePhase.RUNNING:
            self._advance(count)

    def _safely(self, action: Callable[[], None]) -> None:
        """Run *action*; any error fails the trace instead of reaching the training job."""
        try:
            action()
        except Exception as exc:
            log.exception("trace %s failed", self.spec.trace_id)
            self._counter.pending = None
            self._stop_quietly()
            self._fail(f"{type(exc).__name__}: {exc}")

    def _stop_quietly(self) -> None:
        """A trace that fails while recording stops its profiler before it gives up the slot."""
        with self._lock:
            recorder = self._recorder
            if self.phase != TracePhase.RUNNING or self._stopped_at or recorder is None:
                return
            self._stopped_at = time.time()
        try:
            recorder.stop()
        except Exception:
            log.exception("trace %s: stopping the profiler after a failure failed", self.spec.trace_id)

    def _maybe_start(self, count: int) -> None:
        if self.spec.until_stopped:
            pass  # the first boundary after the start command
        elif self.spec.step_based:
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
        self._start(count)

    def _start(self, count: int, at_boundary: bool = True) -> None:
        with self._lock:
            if self.phase != TracePhase.READY:  # a stop, or a boundary on another thread, came first
                return
            self._at_boundaries = at_boundary
            self._recorder = self._recording.factory(self.spec)
            self._recorder.start(first_step=count)
            self.start_step = count
            self._started_at = time.time()
            if not self.spec.step_based:
                self._stop_at_ms = max(time.time() * 1000, self.spec.start_time_ms) + self.spec.duration_ms
            self.phase = TracePhase.RUNNING
        self._emit(count)

    def _advance(self, count: int) -> None:
        assert self._recorder is not None
        if self._stop_requested or self.spec.until_stopped:
            done = self._stop_requested
        elif self.spec.step_based:
            done = count >= self.stop_step
        else:
            done = time.time() * 1000 >= self._stop_at_ms
        if done:
            return self._finish(count)
        self._recorder.step()

    def _finish(self, stop_step: int, note: str = "", incomplete: str = "") -> None:
        """Stop the profiler once (a boundary, the grace timer and the exit may race) and write: on a
        thread of its own, or here when the process is exiting."""
        with self._lock:
            if self._stopped_at or self._recorder is None:
                return
            self._stopped_at = time.time()
            self._counter.pending = None
            self._recorder.stop()
            self.stop_step = stop_step
        notes = [n for n in (note, incomplete and f"incomplete: {incomplete}") if n]
        if incomplete:
            return self._write(notes, incomplete)
        self._writer = threading.Thread(
            target=self._write, args=(notes,), name="msmonitor-trace-writer", daemon=True
        )
        self._writer.start()

    # --- writer thread ----------------------------------------------------------------------------

    def _write(self, notes: List[str], incomplete: str = "") -> None:
        assert self._recorder is not None
        try:
            files = self._recorder.write()
            if self.spec.until_stopped:
                files.append(
                    self._recorder.add_file(prof.INFO_FILE, prof.info_text(self._info(notes, incomplete)))
                )
        except RecorderError as exc:  # it names the folder and the reason already
            log.warning("trace %s: %s", self.spec.trace_id, exc)
            return self._fail(str(exc))
        except OSError as exc:  # the folder went away or read-only since the trace was accepted, say
            folder = os.path.dirname(exc.filename) if isinstance(exc.filename, str) else self._recorder.output
            log.warning("trace %s: %s", self.spec.trace_id, exc)
            return self._fail(str(unwritable(folder, exc)))
        except Exception as exc:
            log.exception("writing trace %s failed", self.spec.trace_id)
            return self._fail(f"writing the trace failed: {type(exc).__name__}: {exc}")
        finally:
            self._close()
        self.phase = TracePhase.FINISHED
        self._on_done()  # the profiler slot is free before the daemon hears the trace is over
        self._emit(files=files, notes=notes, size_bytes=prof.size_of(files))

    def _info(self, notes: List[str], incomplete: str) -> prof.WindowInfo:
        assert self._recorder is not None
        spec, stepped = self.spec, self._at_boundaries
        return prof.WindowInfo(
            trace_id=spec.trace_id,
            backend=self._recorder.backend,
            rank=identity.rank(os.environ),
            start_time=self._started_at,
            stop_time=self._stopped_at,
            first_step=self.start_step if stepped else -1,
            last_step=self.stop_step - 1 if stepped else -1,
            complete=not incomplete,
            options={
                "activities": spec.activities,
                "record_shapes": spec.record_shapes,
                "profile_memory": spec.profile_memory,
                "with_stack": spec.with_stack,
                "with_modules": spec.with_modules,
                **{key.lower(): value for key, value in spec.msprof.items()},
            },
            warnings=[*self._recorder.warnings, *notes],
        )

    # --- any thread -------------------------------------------------------------------------------

    def abort(self, why: str) -> None:
        """The process is exiting: a window keeps what it recorded (marked incomplete); a trace fails."""
        if self.phase.final:
            return
        if self.spec.until_stopped and self.phase == TracePhase.RUNNING:
            writer = self._writer
            if writer is not None:  # stopped already: let it finish writing
                writer.join(WRITE_AT_EXIT_S)
                return
            return self._safely(lambda: self._finish(self._counter.count + 1, incomplete=why))
        self._counter.pending = None
        self._fail(why)

    def _fail(self, error: str) -> None:
        self.phase = TracePhase.FAILED
        if self._writer is None:  # else the writer closes them as it ends: never under it
            self._close()
        self._on_done()  # the profiler slot is free before the daemon hears the trace is over
        self._emit(error=error)

    def _close(self) -> None:
        """Close the folders held open for the trace (once: a failed write comes here twice)."""
        folder, self.spec.folder = self.spec.folder, None
        if folder is not None:
            folder.close()
        if self._recorder is not None:
            self._recorder.close()

    def _emit(
        self,
        current: Optional[int] = None,
        files: Optional[List[str]] = None,
        error: str = "",
        notes: Optional[List[str]] = None,
        size_bytes: int = 0,
    ) -> None:
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
                warnings=[*(recorder.warnings if recorder is not None else []), *(notes or [])],
                size_bytes=size_bytes,
            )
        )
