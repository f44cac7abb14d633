"""MindStudio's cluster analyser, ``msprof-analyze`` 26.2.0 as published, reads npu-monitor's databases.

A real CPU PyTorch job of two ranks (tests/workloads/train.py in one gloo group, each step all-reducing
its loss) is monitored through a real daemon with ``dyno npu-monitor --log-file DIR --export-type DB``;
then ``msprof-analyze cluster -d DIR -m RECIPE`` runs in its own virtual environment (tests/peers.py)
and its results (``cluster_analysis_output/cluster_analysis.db``, the default export) are checked
against what the files hold, read back with the plugin's own reader.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List

import pytest

import peers
from harness import Daemon, trainer, wait_until
from msmonitor_plugin.monitor import Kind, db_reader

pytestmark = pytest.mark.torch

RECIPES = ("compute_op_sum", "cann_api_sum", "mstx_sum", "hccl_sum")
KINDS = "Kernel,API,Marker,Communication"


@pytest.fixture(scope="module")
def msprof_analyze() -> Path:
    return peers.need(peers.MSPROF_ANALYZE_PEER)


def database(logs: Path, pid: int) -> Path:
    """Process *pid*'s database, once its writer made it."""
    return wait_until(lambda: next(logs.glob(f"msmonitor_{pid}_*.db"), None), what=f"pid {pid}'s database")


def wait_idle(daemon: Daemon, pid: int) -> None:
    """Until process *pid*'s monitor stopped (its database closed)."""
    wait_until(
        lambda: (daemon.process(pid) or {}).get("monitor_state") == "MONITOR_STATE_IDLE",
        what=f"pid {pid}'s monitor to stop",
    )


def recorded(path: Path) -> bool:
    """Whether *path* holds a kernel, a marker range and a collective yet (the writer commits each batch)."""
    query = (
        "SELECT (SELECT count(*) FROM COMPUTE_TASK_INFO) * (SELECT count(*) FROM MSTX_EVENTS)"
        " * (SELECT count(*) FROM COMMUNICATION_OP)"
    )
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with contextlib.closing(db), contextlib.suppress(sqlite3.OperationalError):  # no tables yet
        return bool(db.execute(query).fetchone()[0])
    return False


def analyse(command: Path, logs: Path, out: Path, recipe: str) -> str:
    result = subprocess.run(
        [str(command), "cluster", "-d", str(logs), "-m", recipe, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=50,  # within the suite's minute a test: a stuck analyser is killed, not left behind
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def table(db: sqlite3.Connection, name: str) -> List[Dict[str, object]]:
    cursor = db.execute(f'SELECT * FROM "{name}"')
    columns = [c[0] for c in cursor.description]
    return [dict(zip(columns, row)) for row in cursor]


def test_msprof_analyze_recipes_read_a_two_rank_torch_jobs_databases(
    daemon: Daemon, start_workload, tmp_path: Path, msprof_analyze: Path
) -> None:
    logs, out = tmp_path / "mon", tmp_path / "analysis"
    group = ["--process-group", f"file://{tmp_path / 'rendezvous'}", "--all-reduce"]
    with ThreadPoolExecutor(2) as pool:  # each rank waits for the other in the group
        jobs = list(
            pool.map(lambda rank: trainer(daemon, start_workload, rank, group, WORLD_SIZE="2"), (0, 1))
        )
    reply = daemon.dyno_json(
        "npu-monitor",
        "--npu-monitor-start",
        "--report-interval-s",
        "1",
        "--mspti-activity-kind",
        KINDS,
        "--log-file",
        str(logs),
        "--export-type",
        "DB",
    )
    assert reply["commandStatus"] == "effective", reply
    files = {job.pid: database(logs, job.pid) for job in jobs}
    wait_until(lambda: all(recorded(f) for f in files.values()), timeout=60, what="every kind in both files")
    daemon.dyno_json("npu-monitor", "--npu-monitor-stop")
    for job in jobs:
        wait_idle(daemon, job.pid)
    assert sorted(f.name.rsplit("_", 1)[1] for f in files.values()) == ["0.db", "1.db"]
    ours = {rank: db_reader.read(str(files[job.pid])).records for rank, job in enumerate(jobs)}

    # The recipes side by side, each into a folder of its own: one after another they took most of a minute.
    with ThreadPoolExecutor(len(RECIPES)) as pool:
        outputs = dict(zip(RECIPES, pool.map(lambda r: analyse(msprof_analyze, logs, out / r, r), RECIPES)))
    assert not any("no such table" in text for text in outputs.values()), outputs
    for recipe, check in zip(
        RECIPES, (check_compute_op_sum, check_cann_api_sum, check_mstx_sum, check_hccl_sum)
    ):
        with contextlib.closing(
            sqlite3.connect(out / recipe / "cluster_analysis_output" / "cluster_analysis.db")
        ) as db:
            check(db, ours)


def check_compute_op_sum(db: sqlite3.Connection, ours: Dict[int, list]) -> None:
    """Every CPU operator each rank wrote, counted by rank; the GEMMs among them."""
    by_type = table(db, "ComputeOpPerRankStatsByOpType")
    assert {(r["Rank"], r["OpType"], r["TaskType"]) for r in by_type} == {
        (0, "N/A", "cpu_op_self"),
        (1, "N/A", "cpu_op_self"),
    }
    for row in by_type:
        assert row["Count"] == sum(1 for r in ours[row["Rank"]] if r.kind == Kind.KERNEL)
    by_name = table(db, "ComputeOpPerRankStatsByOpName")
    for rank in (0, 1):
        names = {r["OpName"] for r in by_name if r["Rank"] == rank}
        assert {"aten::addmm", "aten::mm"} <= names, names
    (everything,) = table(db, "ComputeOpAllRankStats")
    assert everything["Count"] == sum(r["Count"] for r in by_type)


def check_cann_api_sum(db: sqlite3.Connection, ours: Dict[int, list]) -> None:
    """Top-level framework operators per rank, the collective among them, with our counts."""
    per_rank = table(db, "CannApiSumRank")
    for rank in (0, 1):
        counts = {r["name"]: r["totalCount"] for r in per_rank if r["rank"] == rank}
        assert {"aten::linear", "c10d::allreduce_"} <= set(counts), counts
        api = [r.name for r in ours[rank] if r.kind == Kind.API]
        assert counts == {name: api.count(name) for name in set(api)}
    assert {r["name"] for r in table(db, "CannApiSum")} >= {"aten::linear", "c10d::allreduce_"}


def check_mstx_sum(db: sqlite3.Connection, ours: Dict[int, list]) -> None:
    """The optimizer's record_function ranges, each rank's, their host and (the CPU's) device time."""
    marks = table(db, "MSTXMarkStats")
    for rank in (0, 1):
        steps = [
            m for m in marks if m["Rank"] == rank and str(m["Name"]).startswith("Optimizer.step#SGD.step")
        ]
        ranges = [r for r in ours[rank] if r.kind == Kind.MARKER and r.name == "Optimizer.step#SGD.step"]
        assert len(steps) == len(ranges) > 0
        assert sorted(m["CannDurationNs"] for m in steps) == sorted(float(r.duration_ns) for r in ranges)
        assert all(m["DeviceDurationNs"] == m["CannDurationNs"] for m in steps)


def check_hccl_sum(db: sqlite3.Connection, ours: Dict[int, list]) -> None:
    """The collectives, per rank, by their type."""
    per_rank = table(db, "HcclPerRankStats")
    for rank in (0, 1):
        (row,) = [r for r in per_rank if r["Rank"] == rank]
        assert row["OpType"] == "c10d::allreduce_"
        assert row["Count"] == sum(1 for r in ours[rank] if r.kind == Kind.COMMUNICATION)
