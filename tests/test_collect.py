"""A job's traces gathered from every host (``--collect DIR``) and loaded as one job by the tool people
use for that, HolisticTraceAnalysis: real daemons on 127.0.0.2 and 127.0.0.3 under mutual TLS (as
tests/test_fanout.py), a real 2-rank PyTorch job with one rank behind each, and the daemon's
``FetchTraceFiles`` checked for what it serves: only the trace's own files, never a link out of its
folder, and NOT_FOUND for a trace it does not know.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, Iterator, List, Set

import grpc
import pytest

import certs_factory as cf
from dynocerts.policy import Role
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, Workload, wait_until
from test_fanout import A, B, Cluster

pytestmark = pytest.mark.torch


def ranks_hta_finds(folder: Path) -> Set[int]:
    """The ranks HolisticTraceAnalysis loads from *folder*, as its users call it."""
    from hta.trace_analysis import TraceAnalysis

    return set(TraceAnalysis(trace_dir=str(folder)).t.get_ranks())


def trainers(cluster: Cluster, tmp_path: Path, process_group: bool) -> List[Workload]:
    """Rank 0 behind A, rank 1 behind B, one job of WORLD_SIZE 2; with *process_group* both join one
    gloo group first (so they start together: each waits for the other)."""
    group = ["--process-group", f"file://{tmp_path / 'rendezvous'}"] if process_group else []

    def start(rank: int, address: str) -> Workload:
        env = {
            **cluster.daemons[address].client_env(),
            "MSMONITOR_USE_DAEMON": "1",
            "RANK": str(rank),
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "2",
        }
        job = Workload("train.py", env, args=group)
        cluster.jobs[address] = job
        return job.start()

    with ThreadPoolExecutor(2) as pool:
        jobs = list(pool.map(start, (0, 1), (A, B)))
    for address, job in zip((A, B), jobs):
        wait_until(
            lambda: any(p["pid"] == job.pid for p in cluster.processes(address)),  # noqa: B023
            what=f"rank behind {address} to register",
        )
    return jobs


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    ca = cf.authority()
    client = cf.certs_dir(tmp_path / "client", Role.CLIENT, ca, cf.leaf(ca, Role.CLIENT, "operator"))
    cluster = Cluster(tmp_path, ca, client)
    try:
        for address in (A, B):
            cluster.start(address)
        yield cluster
    finally:
        for job in cluster.jobs.values():
            job.stop()
        for daemon in cluster.daemons.values():
            daemon.cleanup()


def distributed_info(trace: Path) -> Dict[str, object]:
    text = trace.read_text()
    assert text.count('"distributedInfo"') == 1, "one distributedInfo, never two"
    return json.loads(text)["distributedInfo"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("process_group", [False, True], ids=["rank-from-env", "gloo-group"])
def test_collect_gathers_every_rank_from_every_host_and_hta_finds_them(
    cluster: Cluster, tmp_path: Path, process_group: bool
):
    jobs = trainers(cluster, tmp_path, process_group)
    collected = tmp_path / "collected"
    result = cluster.dyno(
        "--hosts", f"{A},{B}",
        "nputrace", "--start-step", "-1", "--iterations", "2", "--log-file", str(tmp_path / "logs"),
        "--analyse", "--wait", "--collect", str(collected),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "collected 6 file(s)" in result.stdout and "from 2 host(s)" in result.stdout
    # One trace per rank at the top, named by host, rank and pid: no two hosts' names can meet. The
    # summaries (JSON too) go in a folder per process, where HTA does not take them for a rank's trace.
    prefixes = [f"{A}_rank0_pid{jobs[0].pid}", f"{B}_rank1_pid{jobs[1].pid}"]
    names = [f"{prefix}.pt.trace.json" for prefix in prefixes]
    assert sorted(p.name for p in collected.iterdir()) == sorted(prefixes + names)
    assert all(len(list((collected / prefix).rglob("summary.*"))) == 2 for prefix in prefixes)
    for rank, name in enumerate(names):
        info = distributed_info(collected / name)
        assert (info["rank"], info["world_size"]) == (rank, 2)
        # A process group's own record (torch's, with its backend and groups) is kept as torch wrote it.
        assert (info["backend"], "pg_count" in info) == (("gloo", True) if process_group else ("", False))
    assert ranks_hta_finds(collected) == {0, 1}

    # The control: the same traces without distributedInfo are one "rank 0" to HTA.
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in names:
        data = json.loads((collected / name).read_text())
        del data["distributedInfo"]
        (bare / name).write_text(json.dumps(data))
    assert ranks_hta_finds(bare) == {0}

    # Collected again into the same folder: nothing is overwritten, each file is named, exit 1.
    before = {name: (collected / name).read_bytes() for name in names}
    again = cluster.dyno("--hostname", A, "trace", _trace_id(result.stdout, A), "--collect", str(collected))
    assert again.returncode == 1
    assert f"{collected / names[0]} exists: not overwritten" in again.stderr
    assert {name: (collected / name).read_bytes() for name in names} == before
    assert not list(collected.rglob("*.part"))


def _trace_id(table: str, host: str) -> str:
    """The trace id in *host*'s row of the fan-out's command table."""
    row = next(line.split() for line in table.splitlines() if line.startswith(host + " "))
    return row[2]


def test_fetch_serves_only_the_traces_own_files_and_not_found_for_another(start_daemon, tmp_path: Path):
    daemon: Daemon = start_daemon("--process-keepalive-s", "3")
    job = Workload("train.py", daemon.plugin_env(RANK="0")).start()
    try:
        wait_until(lambda: daemon.process(job.pid), what="the trainer to register")
        logs = tmp_path / "logs"
        started = daemon.dyno_json(
            "nputrace",
            "--start-step",
            "-1",
            "--iterations",
            "2",
            "--log-file",
            str(logs),
            "--analyse",
            "--wait",
        )
    finally:
        job.stop()
    (process,) = started["trace"]["processes"]
    trace_file, summary_json, summary_txt = (Path(f) for f in process["files"])
    # Beside the trace's files: one the process did not report, and a reported one swapped for a link.
    (logs / "planted.json").write_text("{}")
    (trace_file.parent / "extra.json").write_text("{}")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the network")
    summary_txt.unlink()
    summary_txt.symlink_to(secret)

    with grpc.insecure_channel(f"localhost:{daemon.port}") as channel:
        stub = pb_grpc.DynologStub(channel)
        chunks = list(stub.FetchTraceFiles(pb.GetTraceRequest(trace_id=started["trace_id"]), timeout=30))
        with pytest.raises(grpc.RpcError) as unknown:
            list(stub.FetchTraceFiles(pb.GetTraceRequest(trace_id="1"), timeout=30))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    served = {c.path for c in chunks if not c.error}
    assert served == {str(trace_file), str(summary_json)}
    assert [c.path for c in chunks if c.trace] == [str(trace_file)]
    (refused,) = [c for c in chunks if c.error]
    assert refused.path == str(summary_txt) and "symbolic link" in refused.error and not refused.data
    assert b"not for the network" not in b"".join(c.data for c in chunks)

    collected = tmp_path / "collected"
    result = daemon.dyno("trace", started["trace_id"], "--collect", str(collected))
    assert result.returncode == 1 and f"{summary_txt}: a symbolic link" in result.stderr, result.stderr
    prefix = f"localhost_rank0_pid{process['host_pid']}"
    assert sorted(p.name for p in collected.iterdir()) == [prefix, f"{prefix}.pt.trace.json"]
    assert (collected / f"{prefix}.pt.trace.json").read_bytes() == trace_file.read_bytes()
    assert (collected / prefix / summary_json.relative_to(logs)).read_bytes() == summary_json.read_bytes()

    nowait = daemon.dyno("nputrace", "--log-file", str(logs), "--collect", str(collected))
    assert nowait.returncode == 2 and "--collect" in nowait.stderr and "--wait" in nowait.stderr


@pytest.mark.parametrize("name", ["../escape.json", "/etc/passwd", "a/../../b", "", "a//b", "./a"])
def test_a_name_a_daemon_sends_never_leaves_the_folder(name: str):
    from dyno.tracing.collect import local_name

    with pytest.raises(ValueError):
        local_name(pb.FileChunk(name=name, rank=0, host_pid=7), "node001")
    assert (
        local_name(pb.FileChunk(name=name, rank=0, host_pid=7, trace=True), "node:1")
        == "node_1_rank0_pid7.json"
    )


@pytest.mark.parametrize("rpc", ["FetchTraceFiles", "FetchMonitorFiles"])
def test_fetching_files_is_for_operators_not_read_only_clients(rpc: str):
    from dynolog.edge.auth import AccessPolicy, Peer, authorize
    from dynoproto import SERVICE

    policy = AccessPolicy(read_only=("viewer",))
    method = f"/{SERVICE}/{rpc}"
    refusal = authorize(Peer("viewer", 1), method, policy, lambda serial: None)
    assert refusal is not None and refusal.code == grpc.StatusCode.PERMISSION_DENIED
    assert authorize(Peer("alice", 2), method, policy, lambda serial: None) is None
