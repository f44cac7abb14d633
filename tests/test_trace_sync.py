"""nputrace --sync --iterations across daemons: dyno picks one start step from every host's processes,
and every rank records exactly those steps."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator, List

import pytest

import certs_factory as cf
from certs_factory import Role
from dyno.fleet import fanout
from dyno.fleet.target import Target
from dyno.tracing import sync as trace_sync
from dyno.tracing.send import Order, follow
from msmonitor_contract.kinds import NPUTRACE
from test_fanout import A, B, C, Cluster
from test_traces import profiler_steps

pytestmark = pytest.mark.torch

JOB_ID = "77"
HOSTS = (A, B, C)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three daemons (127.0.0.2-4, mutual TLS), each with one rank of job 77: one gloo group that
    all-reduces each step, started together (each rank waits in the group for the others)."""
    ca = cf.authority()
    workdir = tmp_path_factory.mktemp("sync")
    client = cf.certs_dir(workdir / "client", Role.CLIENT, ca, cf.leaf(ca, Role.CLIENT, "operator"))
    cluster = Cluster(workdir, ca, client)
    try:
        cluster.start(HOSTS[0])  # the others listen on the port it was given
        with ThreadPoolExecutor(len(HOSTS)) as pool:
            list(pool.map(cluster.start, HOSTS[1:]))
        cluster.train_one_job(HOSTS, JOB_ID, ["--step-ms", "20"])
        yield cluster
    finally:
        for workload in cluster.jobs.values():
            workload.stop()
        for daemon in cluster.daemons.values():
            daemon.cleanup()


def test_sync_iterations_starts_every_rank_at_one_step(job: Cluster, tmp_path: Path):
    args = ("nputrace", "--job-id", JOB_ID, "--iterations", "2", "--log-file", str(tmp_path), "--sync")
    answers = job.dyno_json("--hosts", ",".join(HOSTS), *args, "--wait", "--wait-timeout", "30")
    assert [a["state"] for a in answers] == ["effective"] * 3, answers
    (start,) = {a["answer"]["start_step"] for a in answers}
    for answer in answers:
        (process,) = answer["answer"]["trace"]["processes"]
        assert process["phase"] == "TRACE_PHASE_FINISHED", process
        assert (process["start_step"], process["stop_step"]) == (start, start + 2), (start, process)
        trace_file = next(Path(process["output"]).glob("*.pt.trace.json"))
        assert profiler_steps(trace_file) == [start, start + 1]


def test_sync_iterations_refusals_and_the_step_it_says(job: Cluster, tmp_path: Path):
    hosts = ("--hosts", f"{A},{B}")
    step_based = ("nputrace", "--iterations", "1", "--log-file", str(tmp_path), "--sync")
    given = job.dyno(*hosts, *step_based, "--start-step", "9")
    assert given.returncode == 2 and "--sync picks the start step itself" in given.stderr
    other = job.dyno(*hosts, *step_based, "--job-id", "78")
    assert other.returncode == 1 and "--sync: no process matches job 78 on " in other.stderr, other.stderr
    text = job.dyno(*hosts, *step_based, "--job-id", JOB_ID, "--wait", "--wait-timeout", "30")
    assert text.returncode == 0, text.stdout + text.stderr
    first = text.stdout.splitlines()[0]
    assert first.startswith("start step: ") and " on 2 process(es) " in first, text.stdout


def test_a_start_step_already_passed_is_retried_once_later_on_every_host(
    job: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The API `dyno respond` calls: the first step chosen is one every rank has passed (the daemons
    refuse it), so the trace goes out again, later, to every host, and every rank records that step."""
    chosen: List[trace_sync.StepSync] = []
    choose = trace_sync.sync_start_step

    def first_one_passed(*args: Any, **kwargs: Any) -> trace_sync.StepSync:
        sync = choose(*args, **kwargs)
        chosen.append(sync._replace(start_step=sync.furthest_step - 5) if not chosen else sync)
        return chosen[-1]

    monkeypatch.setattr(trace_sync, "sync_start_step", first_one_passed)
    fleet = fanout.fleet(Target(port=job.port, certs_dir=str(job.client), hosts=",".join(HOSTS)))
    request = NPUTRACE.build(
        {
            "targets": {"job_id": int(JOB_ID)},
            "iterations": 2,
            "log_file": str(tmp_path),
            "activities": ["CPU"],
        }
    )
    started = trace_sync.start_at_one_step(fleet, Order(NPUTRACE, request), parallel=8)
    rows = [(o.host, [(p.reason, p.detail) for p in o.answer.response.processes]) for o in started.outcomes]
    assert started.late and len(chosen) == 2 and started.sync == chosen[1], rows
    assert chosen[1].lead_steps >= 2 * chosen[0].lead_steps
    assert [o.state for o in started.outcomes] == ["effective"] * 3, started.outcomes
    followed = follow(started.sync.reached, started.outcomes, timeout=30)
    assert [o.state for o in followed] == ["effective"] * 3, followed
    start = started.sync.start_step
    for outcome in followed:
        (process,) = outcome.answer.info.processes
        assert (process.start_step, process.stop_step) == (start, start + 2), process
