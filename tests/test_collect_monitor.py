"""A job's npu-monitor databases gathered from every host (``dyno npu-monitor --collect DIR``) and read as
one job by MindStudio's cluster analyser: real daemons on 127.0.0.2 and 127.0.0.3 under mutual TLS (as
tests/test_collect.py), a real PyTorch job with one rank behind each monitored with ``--log-file
--export-type DB``, then ``msprof-analyze cluster -d DIR -m compute_op_sum`` on what came (where its
environment was made under .peers/). And the daemon's ``FetchMonitorFiles`` checked for what it serves:
only the files named for a process it started a monitor in, from the folder it sent, once that monitor
stopped (and still after the process left), never a link.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import List, Sequence

import grpc
import pytest

from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, Workload, wait_until
from msmonitor_plugin.monitor import db_reader
from test_collect import cluster, trainers  # noqa: F401 (cluster: the fixture)
from test_fanout import A, B, Cluster
from test_peer_msprof_analyze import analyse, check_compute_op_sum, database, msprof_analyze  # noqa: F401


def operators(path: Path) -> bool:
    """Whether *path* holds an operator yet (the writer commits each batch)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with contextlib.closing(db), contextlib.suppress(sqlite3.OperationalError):  # no tables yet
        return bool(db.execute("SELECT count(*) FROM COMPUTE_TASK_INFO").fetchone()[0])
    return False


@pytest.mark.torch
def test_collect_gathers_every_ranks_database_from_every_host_as_msprof_analyze_reads_a_job(
    cluster: Cluster,  # noqa: F811
    msprof_analyze: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    jobs = trainers(cluster, tmp_path, process_group=False)
    logs, collected = tmp_path / "mon", tmp_path / "collected"
    hosts = ("--hosts", f"{A},{B}")
    started = cluster.dyno(
        *hosts, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
        "--mspti-activity-kind", "Kernel,API,Marker", "--log-file", str(logs), "--export-type", "DB",
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    files = [database(logs, job.pid) for job in jobs]
    wait_until(lambda: all(operators(f) for f in files), timeout=60, what="operators in both files")
    # Stopped and fetched in one command: each daemon fetches once its process said it stopped.
    result = cluster.dyno(*hosts, "npu-monitor", "--npu-monitor-stop", "--collect", str(collected))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "collected 2 file(s)" in result.stdout and "from 2 host(s)" in result.stdout
    # Both ranks wrote into one folder here (one machine); each daemon served its own rank's file only,
    # into a folder of its host, under the name the plugin gave it.
    placed = {address: collected / address / f.name for address, f in zip((A, B), files)}
    assert sorted(p for p in collected.rglob("*") if p.is_file()) == sorted(placed.values())
    assert all(placed[a].read_bytes() == f.read_bytes() for a, f in zip((A, B), files))
    assert [f.name.rsplit("_", 1)[1] for f in files] == ["0.db", "1.db"]

    analyse(msprof_analyze, collected, tmp_path / "analysis", "compute_op_sum")
    with contextlib.closing(
        sqlite3.connect(tmp_path / "analysis" / "cluster_analysis_output" / "cluster_analysis.db")
    ) as db:
        check_compute_op_sum(db, {rank: db_reader.read(str(f)).records for rank, f in enumerate(files)})


def fetch(daemon: Daemon, ranks: Sequence[int] = ()) -> List[pb.FileChunk]:
    with grpc.insecure_channel(f"localhost:{daemon.port}") as channel:
        request = pb.FetchMonitorFilesRequest(targets=pb.Targets(ranks=ranks))
        return list(pb_grpc.DynologStub(channel).FetchMonitorFiles(request, timeout=30))


def test_fetch_serves_only_the_monitors_own_files_once_it_stopped_and_after_the_process_left(
    start_daemon, tmp_path: Path
) -> None:
    daemon: Daemon = start_daemon("--process-keepalive-s", "3")
    logs = tmp_path / "mon"
    job = Workload("idle.py", daemon.plugin_env(RANK="0"), args=["--init"]).start()  # no framework
    try:
        wait_until(lambda: daemon.process(job.pid), what="the process to register")
        started = daemon.dyno_json(
            "npu-monitor", "--npu-monitor-start", "--log-file", str(logs), "--export-type", "DB"
        )
        assert started["commandStatus"] == "effective", started
        own = database(logs, job.pid)
        (busy,) = fetch(daemon)
        assert "may still write" in busy.error and not busy.data, busy
        first = tmp_path / "first"
        stopped = daemon.dyno("npu-monitor", "--npu-monitor-stop", "--collect", str(first))
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert (first / "localhost" / own.name).read_bytes() == own.read_bytes()
    finally:
        job.stop()
    wait_until(lambda: daemon.process(job.pid) is None, what="the process to leave")
    # Beside its file: another process's, another rank's, one named for it but a link, and another name.
    for name in (
        f"msmonitor_{job.pid + 1}_20260101000000000_0.db",
        f"msmonitor_{job.pid}_20260101000000000_1.db",
    ):
        (logs / name).write_bytes(b"not its file")
    (logs / "notes.db").write_bytes(b"not a monitor's file")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the network")
    link = logs / f"msmonitor_{job.pid}_20990101000000000_0.db"
    link.symlink_to(secret)

    chunks = fetch(daemon)
    assert {c.path for c in chunks if not c.error} == {str(own)}
    (refused,) = [c for c in chunks if c.error]
    assert refused.path == str(link) and "symbolic link" in refused.error and not refused.data
    assert b"".join(c.data for c in chunks if not c.error) == own.read_bytes()
    assert fetch(daemon, ranks=[1]) == []

    collected = tmp_path / "collected"
    result = daemon.dyno("npu-monitor", "--collect", str(collected))
    assert result.returncode == 1 and f"{link}: a symbolic link" in result.stderr, result.stderr
    assert [p.relative_to(collected) for p in collected.rglob("*")] == [
        Path("localhost"),
        Path("localhost", own.name),
    ]
    assert (collected / "localhost" / own.name).read_bytes() == own.read_bytes()

    nothing = daemon.dyno("npu-monitor", "--rank-list", "1", "--collect", str(tmp_path / "none"))
    assert nothing.returncode == 1 and "no npu-monitor files to fetch" in nothing.stderr, nothing.stderr
    started_too = daemon.dyno("npu-monitor", "--npu-monitor-start", "--collect", str(tmp_path / "x"))
    assert started_too.returncode == 2 and "--npu-monitor-stop" in started_too.stderr


def test_the_daemon_keeps_the_latest_folders_and_knows_a_process_files_by_pid_and_rank() -> None:
    from dynolog.core.registry import ProcessRecord
    from dynolog.edge.monitor_files import MonitorOutputs
    from msmonitor_contract.targets import Targets

    outputs = MonitorOutputs(kept=2)
    for pid, rank in ((10, 0), (11, -1), (12, 1)):
        outputs.remember(ProcessRecord(host_pid=pid, pid=pid, uid=0, rank=rank), "/mon")
    assert [o.pid for o in outputs.select(Targets())] == [12, 11]  # the oldest forgotten; rank order
    (ranked,) = outputs.select(Targets(ranks=(1,)))
    assert ranked.owns("msmonitor_12_20260101000000000_1.db")
    assert ranked.owns("msmonitor_12_20260101000000000_1.jsonl")
    for other in ("msmonitor_12_20260101000000000_0.db", "msmonitor_120_20260101000000000_1.db", "x_12.db"):
        assert not ranked.owns(other), other
    (unranked,) = outputs.select(Targets(pids=(11,)))
    assert unranked.owns("msmonitor_11_20260101000000000_3.db")


@pytest.mark.parametrize(
    "name", ["../msmonitor_1_20260101000000000_0.db", "a/msmonitor_1_20260101000000000_0.db", "x.db", ""]
)
def test_a_monitor_file_a_daemon_sends_is_named_as_one_or_refused(name: str) -> None:
    from dyno.tracing.collect import monitor_name

    with pytest.raises(ValueError):
        monitor_name(pb.FileChunk(name=name), "node001")
    own = "msmonitor_1_20260101000000000_0.db"
    assert monitor_name(pb.FileChunk(name=own), "node:1") == f"node_1/{own}"
