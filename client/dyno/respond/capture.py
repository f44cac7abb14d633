"""One capture of a whole job: the same steps traced on every rank, followed to the end, collected.

The request is ``dyno nputrace``'s own, built from its flags (so its defaults are the command's):
``--job-id J --iterations N --analyse``, and ``--pause-monitor`` when a rank is monitored (it pauses
its monitor for the trace, and resumes it), sent as ``nputrace --sync`` sends it: one start step for
every rank, chosen from every host's processes' steps and pace (``tracing.sync.start_at_one_step``).
Each host's trace is then followed until its processes wrote their files, and the files are fetched
into one folder laid out as HolisticTraceAnalysis reads a job (``dyno.tracing.collect``: one
``*.pt.trace.json`` per rank at the top, each with its ``distributedInfo``).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence

from msmonitor_contract.kinds import NPUTRACE

from ..commands import nputrace
from ..declared import request as built_from
from ..flags import check_fields
from ..fleet import fanout
from ..model.traces import FileChunk, TraceInfo, TraceProcess
from ..tracing import collect, sync
from ..tracing.progress import phase_name
from ..tracing.send import Order, follow
from .jobs import JobHosts, RankProcess

DEFAULT_NODE_DIR = "/tmp/msmonitor-respond"
TRACES = "traces"  # the collected rank set, in the incident's folder: nothing else at its top


@dataclass(frozen=True)
class CaptureSettings:
    iterations: int
    node_dir: str = DEFAULT_NODE_DIR  # where the ranks write, on their nodes
    wait_timeout: float = 600.0


@dataclass
class RankTrace:
    """One process's part of the capture."""

    host: str
    rank: int
    pid: int
    host_pid: int
    trace_id: str
    start_step: int
    stop_step: int
    state: str  # the trace's phase there: finished, failed, ...
    files: List[str] = field(default_factory=list)  # relative to the incident's folder
    error: str = ""


@dataclass
class Capture:
    start: int
    stop: int
    ranks: List[RankTrace]
    failed: List[str]  # "host: why" for each host or file that did not come

    @property
    def complete(self) -> bool:
        return not self.failed and bool(self.ranks) and all(r.state == "finished" for r in self.ranks)


def request(job: JobHosts, settings: CaptureSettings, folder: str) -> Any:
    """The trace request ``dyno nputrace`` would send for these flags (see :func:`command_line`); its
    start step is chosen as it is sent."""
    from ..app import parsed

    args = parsed(nputrace.COMMAND, _flags(job, settings, folder))
    built = dataclasses.replace(built_from(NPUTRACE, nputrace.FLAGS, args), duration_ms=0)  # step-based
    check_fields(NPUTRACE.check(built))
    return built


def command_line(job: JobHosts, settings: CaptureSettings, folder: str) -> str:
    """The same capture as one ``dyno`` command, for the record (and to run by hand)."""
    hosts = ",".join(job.hosts)
    flags = _flags(job, settings, folder)
    return shlex.join(["dyno", "--hosts", hosts, "nputrace", *flags, "--sync", "--wait"])


def _flags(job: JobHosts, settings: CaptureSettings, folder: str) -> List[str]:
    # A monitored rank would refuse the trace: it pauses its monitor instead (which costs the start
    # step the daemon's wait for the monitors' answers, so only when a rank is monitored).
    paused = ["--pause-monitor"] if any(p.monitored for p in job.processes) else []
    return [
        "--job-id", str(job.job_id),
        "--iterations", str(settings.iterations),
        "--log-file", folder,
        "--analyse",
        *paused,
    ]  # fmt: skip


def plan(job: JobHosts, trace: Any) -> int:
    """The start step :func:`start` would send now (for a dry run, which sends nothing)."""
    pause_s = sync.PAUSE_LEAD_S if trace.pause_monitor else 0.0
    return sync.sync_start_step(job.targets, trace.targets, _parallel(job), extra_s=pause_s).start_step


def start(job: JobHosts, trace: Any) -> sync.SyncedStart:
    """*trace* sent to every host of *job* at one start step (``synced.sync.start_step``)."""
    return sync.start_at_one_step(job.targets, Order(NPUTRACE, trace), _parallel(job))


def finish(
    job: JobHosts,
    synced: sync.SyncedStart,
    settings: CaptureSettings,
    incident_dir: str,
) -> Capture:
    """Each host's trace followed to its end; the files fetched into ``incident_dir/traces``."""
    failed = [f"{o.host}: {o.why}" for o in synced.outcomes if o.state != fanout.EFFECTIVE]
    followed = follow(synced.sync.reached, synced.outcomes, settings.wait_timeout)
    failed += [f"{o.host}: {o.why}" for o in followed if o.state != fanout.EFFECTIVE]
    infos = {o.host: o.answer.info for o in followed if o.answer is not None and o.answer.info is not None}
    traces_dir = os.path.join(incident_dir, TRACES)
    fetched = [(one, infos[one.label].trace_id) for one in job.targets if one.label in infos]
    flags = Namespace(collect=traces_dir, wait_timeout=settings.wait_timeout)
    missing = collect.requested(flags, fetched, quiet=True)
    if missing:
        failed.append(missing)
    ranks = _ranks(infos, traces_dir)
    start_step = synced.sync.start_step
    return Capture(start_step, start_step + settings.iterations, ranks, failed)


def _parallel(job: JobHosts) -> int:
    return job.targets[0].parallel


def _ranks(infos: Dict[str, TraceInfo], traces_dir: str) -> List[RankTrace]:
    present = set(os.listdir(traces_dir)) if os.path.isdir(traces_dir) else set()
    ranks = []
    for host, info in infos.items():
        for p in info.processes:
            stem = _stem(host, p)
            files = sorted(os.path.join(TRACES, n) for n in present if n == stem or n.startswith(stem + "."))
            ranks.append(
                RankTrace(
                    host,
                    p.rank,
                    p.pid,
                    p.host_pid,
                    info.trace_id,
                    p.start_step,
                    p.stop_step,
                    phase_name(p.phase),
                    files,
                    p.error,
                )
            )
    return sorted(ranks, key=lambda r: (r.rank, r.host, r.host_pid))


def _stem(host: str, p: TraceProcess) -> str:
    """The name ``dyno.tracing.collect`` gives this process's files in the traces folder, without suffix."""
    trace_name = collect.local_name(FileChunk(rank=p.rank, host_pid=p.host_pid, trace=True), host)
    return trace_name[: -len(".json")]


def missing_ranks(job: JobHosts, ranks: Sequence[RankTrace]) -> List[int]:
    """Ranks of the job (0 .. world size - 1) that no collected trace stands for."""
    have = {r.rank for r in ranks if r.files}
    return [r for r in range(job.world_size) if r not in have]


def suspect_of(processes: Sequence[RankProcess], rank: int) -> str:
    """The host of *rank*, where the job's daemons know it."""
    return next((p.host for p in processes if p.rank == rank), "")
