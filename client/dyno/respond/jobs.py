"""From an alert's job id to the job's ranks: which daemons to ask (``--hosts-from``), then which of
them have the job's processes.

``--hosts-from`` says where a job's hosts are written down:

* ``slurm``: ``scontrol show job`` (as ``dyno --slurm-job``);
* ``kubernetes`` or ``kubernetes:SELECTOR``: the nodes of the job's running pods (``kubectl get pods
  -A -l SELECTOR``; ``{job}`` in it is the job id; default ``msmonitor.io/job-id={job}``, the label
  to give the job's pods beside ``MSMONITOR_JOB_ID``). The DaemonSet runs on the host network, so a
  pod's node is where its daemon listens;
* ``file:PATH``: a host file (as ``--hostfile``), for a fixed set of nodes.

Then every one of those daemons is asked for the job's processes (``ListProcesses``), and only the
hosts that have one are kept: the same test whatever the source, and a job that is gone (finished,
crashed, requeued elsewhere) is one that no host has a process of.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import List, NamedTuple

from msmonitor_contract.targets import Targets
from msmonitor_contract.values import FlagValueError
from msmonitor_contract.vocabulary import MonitorState

from ..exits import EXIT_USAGE, CliError
from ..fleet import fanout
from ..fleet.target import Target

SOURCES = ("slurm", "kubernetes", "file")
DEFAULT_SELECTOR = "msmonitor.io/job-id={job}"
KUBECTL_TIMEOUT_S = 30.0


class HostsFrom(NamedTuple):
    kind: str  # one of SOURCES
    detail: str = ""  # file: its path; kubernetes: the label selector

    def __str__(self) -> str:
        return f"{self.kind}:{self.detail}" if self.detail else self.kind


def hosts_from(text: str) -> HostsFrom:
    """``--hosts-from``'s value (a flag's type)."""
    kind, colon, detail = text.partition(":")
    if kind == "slurm" and not colon:
        return HostsFrom(kind)
    if kind == "kubernetes":
        return HostsFrom(kind, detail or DEFAULT_SELECTOR)
    if kind == "file" and detail:
        return HostsFrom(kind, detail)
    raise FlagValueError(f"expected slurm, kubernetes[:SELECTOR] or file:PATH, got {text!r}")


@dataclass(frozen=True)
class RankProcess:
    """One process of the job, as its daemon registered it."""

    host: str  # as dyno reaches the daemon
    pid: int
    host_pid: int
    rank: int
    world_size: int
    current_step: int
    monitored: bool


@dataclass
class JobHosts:
    job_id: int
    source: HostsFrom
    targets: List[Target]  # the daemons with at least one of the job's processes
    processes: List[RankProcess]
    unreachable: List[str] = field(default_factory=list)  # "host: why", of the hosts asked

    @property
    def hosts(self) -> List[str]:
        return [t.label for t in self.targets]

    @property
    def world_size(self) -> int:
        return max((p.world_size for p in self.processes), default=0)


class JobGone(Exception):
    """No process of the job anywhere its source points: the message says where it looked."""


def job_hosts(job_id: int, source: HostsFrom, base: Target) -> JobHosts:
    """The job's daemons and processes; :class:`JobGone` when there are none."""
    try:
        fleet = fanout.fleet(_named(job_id, source, base))
    except CliError as exc:  # scontrol's "pending or gone", an unreadable host file
        raise JobGone(str(exc).splitlines()[0]) from None
    outcomes = fanout.gather(fleet, lambda one: _processes(one, job_id), base.parallel)
    processes = [p for o in outcomes if o.answer for p in o.answer]
    unreachable = [f"{o.host}: {o.why}" for o in outcomes if o.answer is None]
    with_job = {p.host for p in processes}
    if not processes:
        from ..fleet.hosts import as_hostlist

        looked = as_hostlist([t.label for t in fleet]) if fleet else "no host"
        why = f"; {len(unreachable)} could not be asked ({unreachable[0]})" if unreachable else ""
        raise JobGone(f"job {job_id} has no process on {looked} (from {source}): gone?{why}")
    targets = [t for t in fleet if t.label in with_job]
    return JobHosts(job_id, source, targets, processes, unreachable)


def _named(job_id: int, source: HostsFrom, base: Target) -> Target:
    """*base* naming the source's hosts the way dyno's fan-out flags do."""
    if source.kind == "slurm":
        return base._replace(slurm_job=str(job_id))
    if source.kind == "file":
        return base._replace(hostfile=source.detail)
    nodes = kubernetes_nodes(source.detail.replace("{job}", str(job_id)))
    if not nodes:
        raise JobGone(
            f"job {job_id}: no running pod matches -l {source.detail.replace('{job}', str(job_id))}"
        )
    return base._replace(hosts=",".join(nodes))


def kubernetes_nodes(selector: str) -> List[str]:
    """The nodes of the running pods *selector* matches, in every namespace, each once."""
    command = [
        "kubectl", "get", "pods", "--all-namespaces", "-l", selector,
        "--field-selector", "status.phase=Running",
        "-o", 'jsonpath={range .items[*]}{.spec.nodeName}{"\\n"}{end}',
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S)
    except FileNotFoundError:
        raise CliError(
            "--hosts-from kubernetes needs kubectl on PATH (with access to the job's pods)", EXIT_USAGE
        ) from None
    except subprocess.TimeoutExpired:
        raise JobGone(f"kubectl get pods -l {selector}: no answer within {KUBECTL_TIMEOUT_S:.0f}s") from None
    if done.returncode != 0:
        raise JobGone(f"kubectl get pods -l {selector}: {done.stderr.strip() or done.returncode}")
    return list(dict.fromkeys(done.stdout.split()))


def _processes(target: Target, job_id: int) -> List[RankProcess]:
    from ..edge.rpc import Daemon

    listed = Daemon(target, "dyno respond").processes(Targets(job_id=job_id))
    return [
        RankProcess(
            target.label,
            p.pid,
            p.host_pid,
            p.rank,
            p.world_size,
            p.current_step,
            p.monitor_state is MonitorState.RUNNING,
        )
        for p in listed
        if p.job_id == job_id  # the daemon filters; an older one may not
    ]
