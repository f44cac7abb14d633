"""From an alert's job id to the job's ranks (`dyno respond --hosts-from`): Slurm and Kubernetes through
their stand-ins (tests/stand_ins), a host file, a real daemon on 127.0.0.2 with the job's processes
registered (plain Python processes with the plugin: no framework is needed to be found). A dry run goes
as far as the request every rank would be sent, with its start step, and sends nothing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from dyno.fleet.target import Target
from dyno.respond import capture, jobs, responder, store
from dyno.respond.jobs import HostsFrom
from dyno.tracing import sync as trace_sync
from harness import Daemon, Workload, wait_until
from msmonitor_contract.values import FlagValueError
from respond_harness import alert, notification

STAND_INS = Path(__file__).resolve().parent / "stand_ins"
NODE, EMPTY = "127.0.0.2", "127.0.0.3"  # a daemon with the job; an address with no daemon
JOB, OTHER_JOB = 77, 5


@pytest.fixture
def node(start_daemon: Callable[..., Daemon], start_workload: Callable[..., Workload]) -> Iterator[Target]:
    """A daemon on NODE with ranks 0 and 1 of JOB and a process of another job; the Target to reach it."""
    daemon = start_daemon("--listen-address", NODE)
    for rank, job in ((0, JOB), (1, JOB), (0, OTHER_JOB)):
        env = daemon.plugin_env(RANK=str(rank), WORLD_SIZE="2", MSMONITOR_JOB_ID=str(job))
        process = start_workload("idle.py", env, "--init")
        wait_until(
            lambda pid=process.pid: any(
                p["pid"] == pid for p in daemon.dyno_json("--hostname", NODE, "processes")
            ),
            what=f"rank {rank} of job {job} to register",
        )
    yield Target(hostname=NODE, port=daemon.port, timeout=3.0)


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.pathsep.join([str(STAND_INS / "slurm"), str(STAND_INS / "kubernetes"), os.environ["PATH"]])
    monkeypatch.setenv("PATH", path)


def test_hosts_from_names_one_of_three_sources():
    assert jobs.hosts_from("slurm") == HostsFrom("slurm")
    assert jobs.hosts_from("kubernetes") == HostsFrom("kubernetes", "msmonitor.io/job-id={job}")
    assert jobs.hosts_from("kubernetes:app=train-{job}") == HostsFrom("kubernetes", "app=train-{job}")
    assert jobs.hosts_from("file:/etc/hosts.txt") == HostsFrom("file", "/etc/hosts.txt")
    for bad in ("file", "file:", "slurm:x", "pbs", ""):
        with pytest.raises(FlagValueError, match="slurm, kubernetes"):
            jobs.hosts_from(bad)


def test_a_host_file_keeps_the_hosts_with_the_jobs_processes(node: Target, tmp_path: Path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"# the job's nodes\n{NODE}\n{EMPTY}\n")
    found = jobs.job_hosts(JOB, HostsFrom("file", str(hostfile)), node)
    assert found.hosts == [NODE] and found.world_size == 2
    assert sorted(p.rank for p in found.processes) == [0, 1]  # not the other job's process
    (unreachable,) = found.unreachable
    assert unreachable.startswith(f"{EMPTY}: ")
    with pytest.raises(jobs.JobGone, match=re.escape("job 78 has no process on 127.0.0.[2-3] (from file:")):
        jobs.job_hosts(78, HostsFrom("file", str(hostfile)), node)


def test_slurm_names_the_jobs_nodes_and_a_pending_or_unknown_job_is_gone(
    node: Target, monkeypatch, stand_ins
):
    slurm_jobs = {str(JOB): ["127.0.0.[2-3]"], "79": ["(null)"]}
    monkeypatch.setenv("STAND_IN_SLURM_JOBS", json.dumps(slurm_jobs))
    assert jobs.job_hosts(JOB, HostsFrom("slurm"), node).hosts == [NODE]
    with pytest.raises(jobs.JobGone, match="pending"):
        jobs.job_hosts(79, HostsFrom("slurm"), node)
    with pytest.raises(jobs.JobGone, match="Invalid job id"):
        jobs.job_hosts(80, HostsFrom("slurm"), node)


def test_kubernetes_names_the_nodes_of_the_jobs_pods(node: Target, monkeypatch, stand_ins):
    pods = {f"msmonitor.io/job-id={JOB}": [NODE], "app=train-77": [NODE, NODE]}
    monkeypatch.setenv("STAND_IN_KUBE_PODS", json.dumps(pods))
    assert jobs.job_hosts(JOB, jobs.hosts_from("kubernetes"), node).hosts == [NODE]
    assert jobs.job_hosts(JOB, jobs.hosts_from("kubernetes:app=train-{job}"), node).hosts == [NODE]
    with pytest.raises(jobs.JobGone, match=r"no running pod matches -l msmonitor\.io/job-id=78"):
        jobs.job_hosts(78, jobs.hosts_from("kubernetes"), node)
    monkeypatch.setenv("STAND_IN_KUBE_DOWN", "1")
    with pytest.raises(jobs.JobGone, match="connection to the server"):
        jobs.job_hosts(JOB, jobs.hosts_from("kubernetes"), node)


def test_a_dry_run_resolves_the_job_and_records_the_request_it_would_send(node: Target, tmp_path: Path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{NODE}\n")
    settings = responder.Settings(
        HostsFrom("file", str(hostfile)),
        capture.CaptureSettings(iterations=3, node_dir="/data/traces"),
        store.rate_limit("0/hour"),  # a dry run traces nothing: no limit applies
        dry_run=True,
    )
    records = store.JobIncidentStore(str(tmp_path / "incidents"))
    log: List[str] = []
    try:
        responder.Responder(node, settings, records, log.append).handle(
            __import__("dyno.respond.alerts").respond.alerts.parse(
                notification(alert(job=str(JOB), rank="1"))
            )
        )
        (incident,) = records.list()
    finally:
        records.close()
    assert incident.action == "dry run" and incident.hosts == [NODE], incident.timeline
    assert incident.suspect == {"host": "n2", "rank": 1}
    start = incident.steps["start"]  # the ranks make no steps: the least lead ahead of step 0
    assert (start, incident.steps["stop"]) == (trace_sync.SYNC_MIN_LEAD_STEPS, start + 3)
    sent = incident.request
    assert sent is not None and sent["NpuTraceRequest"]["targets"]["job_id"] == str(JOB)
    assert (sent["NpuTraceRequest"]["start_step"], sent["NpuTraceRequest"]["iterations"]) == (str(start), 3)
    assert sent["NpuTraceRequest"]["log_file"] == f"/data/traces/{incident.id}"
    # No rank is monitored: none has a monitor to pause (which would cost the start step a wait).
    assert "pause_monitor" not in sent["NpuTraceRequest"] and sent["NpuTraceRequest"]["analyse"] is True
    assert sent["command"].startswith(
        f"dyno --hosts {NODE} nputrace --job-id {JOB} --iterations 3 --log-file"
    )
    assert sent["command"].endswith("--analyse --sync --wait")
    assert (
        json.loads((tmp_path / "incidents" / incident.id / "incident.json").read_text())["action"]
        == "dry run"
    )
    assert any(line.startswith(f"incident {incident.id}: job {JOB}: dry run") for line in log)
