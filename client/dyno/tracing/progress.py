"""Where a trace stands in each process (``TraceInfo``): followed until every process finished or
failed (:func:`watch`, progress on stderr), shown as a table and a timeline, judged.

``dyno trace`` shows one; ``nputrace`` and ``gputrace`` follow theirs with ``--wait``. It loads gRPC:
those commands import it inside ``run``.
"""

from __future__ import annotations

import sys
import time
from typing import Dict, List, Optional, Sequence

from msmonitor_contract.vocabulary import TracePhase

from ..exits import EXIT_FAILED, EXIT_INTERRUPTED, CliError
from ..fleet.target import Target
from ..model.traces import TraceInfo, TraceProcess, TraceSummary
from ..output import rank_text, size_text, table

TRACE_HEADERS = ("PID", "RANK", "PHASE", "STEPS", "FILES / ERROR")
LIST_HEADERS = ("TRACE ID", "KIND", "CREATED", "PROCESSES", "FOLDER", "FILES")


def watch(target: Target, trace_id: str, timeout: float, quiet: bool = False, label: str = "") -> TraceInfo:
    """Follow a trace until every process finished or failed, or *timeout* passes. *label* names the
    host in progress lines, when several are followed at once."""
    from ..edge.rpc import Daemon

    deadline = time.monotonic() + timeout
    last: Optional[TraceInfo] = None
    seen: Dict[int, Optional[TracePhase]] = {}
    prefix = f"{label} " if label else ""
    with Daemon(target, "dyno trace").watch_trace(trace_id, timeout) as stream:
        for info in stream:
            last = info
            if not quiet:
                _progress(info, seen, prefix)
            if info.done or time.monotonic() > deadline:
                break
    if stream.interrupted:
        raise CliError(
            f"stopped following trace {trace_id} (Ctrl-C); the trace goes on: "
            f"dyno trace {trace_id} shows it, dyno trace {trace_id} --cancel cancels it",
            EXIT_INTERRUPTED,
        )
    if stream.timed_out and not quiet:
        print(f"dyno: {prefix}--wait-timeout: gave up after {timeout:.0f}s", file=sys.stderr)
    if last is None:
        raise CliError(f"the daemon has no trace {trace_id}", EXIT_FAILED)
    return last


def _progress(info: TraceInfo, seen: Dict[int, Optional[TracePhase]], prefix: str) -> None:
    """One line per process each time its phase changes, so a long wait shows where it stands. One
    write each: lines from hosts followed at once must not interleave."""
    for p in info.processes:
        if seen.get(p.host_pid) != p.phase:
            seen[p.host_pid] = p.phase
            line = f"  {prefix}pid {p.pid} (rank {rank_text(p.rank)}): {phase_name(p.phase)}{_steps(p)}\n"
            sys.stderr.write(line)
            sys.stderr.flush()


def print_trace(info: TraceInfo) -> None:
    print(f"trace {info.trace_id} ({info.kind}): {'done' if info.done else 'in progress'}")
    print(table(TRACE_HEADERS, trace_rows(info)))
    for p in info.processes:
        for warning in p.warnings:
            print(f"  warning (pid {p.pid}): {warning}")
        print(f"  pid {p.pid}: " + ", ".join(f"{phase_name(h.phase)} {clock(h.at)}" for h in p.history))


def trace_rows(info: Optional[TraceInfo]) -> List[List[str]]:
    """Each process of the trace under :data:`TRACE_HEADERS`: its phase, steps, and files or error."""
    return [
        [
            str(p.pid),
            rank_text(p.rank),
            phase_name(p.phase),
            _steps(p).strip(" ()"),
            p.error or ", ".join(p.files) or p.output,
        ]
        for p in (info.processes if info is not None else ())
    ]


def print_traces(listed: Sequence[TraceSummary]) -> None:
    if not listed:
        print("no traces on this daemon (it keeps the traces since it started)")
        return
    print(table(LIST_HEADERS, listed_rows(listed)))


def listed_rows(listed: Optional[Sequence[TraceSummary]]) -> List[List[str]]:
    """Each listed trace under :data:`LIST_HEADERS`, newest first."""
    return [
        [
            t.trace_id,
            t.kind,
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t.created_at)),
            ", ".join(f"{c.processes} {phase_name(c.phase)}" for c in t.phases) or "none",
            ", ".join(t.folders) or "-",
            f"{t.files} ({size_text(t.size_bytes)})" if t.files else "-",
        ]
        for t in (listed if listed is not None else ())
    ]


def trace_failed(info: TraceInfo) -> str:
    """What failed in the trace, or "" when no process failed it."""
    failed = [str(p.pid) for p in info.processes if p.phase is TracePhase.FAILED]
    return f"trace {info.trace_id} failed in pid {', '.join(failed)}" if failed else ""


def all_finished(info: TraceInfo) -> bool:
    return info.done and all(p.phase is TracePhase.FINISHED for p in info.processes)


def clock(at: float) -> str:
    """An epoch time as this host's wall clock, to the millisecond."""
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


def phase_name(phase: Optional[TracePhase]) -> str:
    return phase.value if phase is not None else "unspecified"


def _steps(p: TraceProcess) -> str:
    if p.start_step >= 0 and p.stop_step > p.start_step:
        return f" (steps {p.start_step}-{p.stop_step - 1})"
    if p.start_step >= 0:
        return f" (from step {p.start_step})"
    return ""
