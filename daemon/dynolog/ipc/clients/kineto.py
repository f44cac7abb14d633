"""Stock Kineto (``KINETO_USE_DAEMON=1``): it polls with ``req`` and reports nothing, so a trace's
progress is read from its polls — busy while tracing, free again when done — and from the file it
writes."""

from __future__ import annotations

import os

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import TracePhase, TraceState

from ...core.registry import ProcessRecord
from ...core.traces import ProcessTrace, Trace, TraceStore
from . import polling

IDLE_POLLS = 5  # free polls after delivery, without a file, before a Kineto trace counts as dropped


class KinetoClient:
    def __init__(self, traces: TraceStore) -> None:
        self._traces = traces

    def poll(self, record: ProcessRecord, config_type: int) -> bytes:
        """Kineto takes a config only while its activity profiler is free (the type bit)."""
        busy = not config_type & wire.CONFIG_ACTIVITIES
        record.framework_trace = TraceState.RUNNING if busy else TraceState.IDLE
        trace = self._traces.active(record.host_pid)
        if trace is None:
            return b""
        process = trace.processes[record.host_pid]
        if process.phase == TracePhase.STAGED and not busy:
            return polling.take(self._traces, record)
        if process.phase == TracePhase.DELIVERED and busy:
            self._traces.set_phase(trace, process, TracePhase.RUNNING)
        elif process.phase == TracePhase.RUNNING and not busy:  # busy, then free again: it is done
            self._check_file(trace, process)
        elif process.phase == TracePhase.DELIVERED:
            # Kineto may take a poll or two to show it accepted; after that, it dropped the config.
            polls = trace.idle_polls[record.host_pid] = trace.idle_polls.get(record.host_pid, 0) + 1
            self._check_file(trace, process, final=polls >= IDLE_POLLS)
        return b""

    def refresh(self, trace: Trace) -> None:
        """Look for the files of processes that took *trace* by polling: they never say they finished."""
        for host_pid in trace.pulled:
            process = trace.processes[host_pid]
            if process.phase in (TracePhase.DELIVERED, TracePhase.RUNNING):
                self._check_file(trace, process, final=False)

    def _check_file(self, trace: Trace, process: ProcessTrace, final: bool = True) -> None:
        if os.path.isfile(process.output):
            process.files[:] = [process.output]
            self._traces.set_phase(trace, process, TracePhase.FINISHED)
        elif final:
            process.error = (
                f"Kineto did not write {process.output} (it ignored the config, or the directory is "
                "missing); see the process's own log"
            )
            self._traces.set_phase(trace, process, TracePhase.FAILED)
