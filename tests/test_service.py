"""The service profiler's JSON switch (``SERVICE_PROF_CONFIG_PATH``) in real processes: an inference-like
workload instrumented with ``ms_service_profiler``, flipped on and off by editing the file."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import peers
from fake_mspti import fake_mspti_build
from harness import Daemon, Workload, dyno, read_line_until, wait_until


class Service:
    """One config file, a HOME of its own, and the workloads that watch it."""

    def __init__(self, tmp_path: Path, start_workload, extra_env: Dict[str, str] | None = None) -> None:
        self.config = tmp_path / "ms_service_profiler_config.json"
        self.prof_dir = tmp_path / "prof"
        self.logs = tmp_path / "logs"
        home = tmp_path / "home"
        home.mkdir()
        self.env = {
            "SERVICE_PROF_CONFIG_PATH": str(self.config),
            "HOME": str(home),
            "MSMONITOR_LOG_PATH": str(self.logs),
            **(extra_env or {}),
        }
        self._start_workload = start_workload

    def start(self, *args: str) -> Workload:
        return self._start_workload("inference.py", self.env, *args)

    def edit(self, **keys: Any) -> None:
        """Rewrite the file as an editor does (a new file renamed over it), keeping the other keys."""
        values = json.loads(self.config.read_text())
        values.update({"prof_dir": str(self.prof_dir), **keys})
        self.write(json.dumps(values))

    def write(self, text: str) -> None:
        temp = self.config.with_suffix(".tmp")
        temp.write_text(text)
        os.replace(temp, self.config)

    def dbs(self, kind: str = "ms_service") -> List[Path]:
        return sorted(self.prof_dir.glob(f"*/Trace_Service/{kind}_*.db"))

    def recording(self) -> bool:
        """A store is open: its WAL file exists (SQLite removes it when the last connection closes)."""
        return any(Path(f"{db}-wal").exists() for db in self.dbs())

    def record_some(self, events: int = 100, **keys: Any) -> Path:
        """Switch on with *keys*, wait until *events* events are stored, switch off; the store's file."""
        self.edit(enable=1, **keys)
        wait_until(self.recording, what="recording to start")
        db = self.dbs()[0]
        wait_until(lambda: stored_events(db) >= events, what=f"{events} events")
        self.edit(enable=0)
        wait_until(lambda: not self.recording(), what="recording to stop")
        return db

    def log(self) -> str:
        return "".join(p.read_text() for p in self.logs.glob("*.log")) if self.logs.exists() else ""


def rows(db: Path, sql: str) -> List[tuple]:
    # Closed at once: an open reader keeps the -wal file that says the store is still open.
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql).fetchall()


def stored_events(db: Path) -> int:
    """Events (slices of duration 0) in the store so far; 0 while its first transaction is uncommitted."""
    try:
        return int(rows(db, "SELECT count(*) FROM slice WHERE duration = 0")[0][0])
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise


def marks(db: Path, where: str = "1") -> List[Dict[str, Any]]:
    """The slice rows (MindIE 26.0's table) in the order written, each message parsed."""
    found = rows(db, f"SELECT name, cat, timestamp, duration, args FROM slice WHERE {where} ORDER BY id")
    keys = ("name", "domain", "ts", "duration", "message")
    return [{**dict(zip(keys, row)), "message": json.loads(row[4])} for row in found]


def served(job: Workload) -> int:
    return int(read_line_until(job.proc, "served").split()[1])


@pytest.fixture
def service(tmp_path, start_workload) -> Service:
    return Service(tmp_path, start_workload)


def test_the_file_is_created_and_spans_and_events_are_recorded_only_while_on(service):
    job = service.start()
    assert json.loads(service.config.read_text())["enable"] == 0, "MindIE's default file, enable 0"
    served(job)
    assert not service.prof_dir.exists(), "nothing recorded while off"
    service.edit(enable=1)
    wait_until(service.recording, what="recording to start")
    served(job)
    service.edit(enable=0)
    wait_until(lambda: not service.recording(), what="recording to stop")
    (db,) = service.dbs()
    counts = {name: n for name, n in rows(db, "SELECT name, count(*) FROM slice GROUP BY name")}
    assert counts["httpReq"] > 0 and counts["httpRes"] > 0 and counts["forward"] > 0
    spans = marks(db, "name = 'forward'")
    assert all(s["domain"] == "ModelExecute" and s["duration"] >= 0 for s in spans)
    assert all(s["message"]["rid"].startswith("req-") and s["message"]["type"] == 2 for s in spans)
    answered = marks(db, "name = 'httpRes'")[0]["message"]
    assert answered == {"rid": answered["rid"], "replyTokenSize=": 8, "type": 0}, "MindIE's message"
    assert {m["message"]["recvTokenSize="] for m in marks(db, "name = 'httpReq'")} == {16}
    before = stored_events(db)
    served(job)
    served(job)  # the service went on serving while off
    assert stored_events(db) == before


def test_two_cycles_within_one_second_are_both_honoured(service):
    job = service.start()
    served(job)
    for _ in range(2):
        service.edit(enable=1)
        wait_until(service.recording, what="recording to start")
        service.edit(enable=0)
        wait_until(lambda: not service.recording(), what="recording to stop")
    (db,) = service.dbs()
    starts = rows(db, "SELECT value FROM Meta WHERE name = 'hostname'")
    assert len(starts) == 2, "each enable is one cycle, appended to the same file"


def test_time_and_step_limits_stop_recording_and_write_enable_0_back(service):
    job = service.start()
    served(job)
    switched_on = time.time()
    service.edit(enable=1, timelimit=1, domain="Request; ModelExecute")
    wait_until(lambda: json.loads(service.config.read_text())["enable"] == 0, what="the timelimit write-back")
    written_back = service.config.stat().st_mtime
    wait_until(lambda: not service.recording(), what="recording to stop")
    (db,) = service.dbs()
    ((last,),) = rows(db, "SELECT max(timestamp) FROM slice WHERE duration = 0")
    # Events against events, not a duration a loaded machine can stretch: recording stops before the
    # write-back, and not before the limit. 10 ms: the file system's clock lags by up to a tick.
    assert last / 1e9 <= written_back + 0.01, "nothing recorded after the stop"
    assert written_back - switched_on >= 1 - 0.01, "the limit ran its second"
    assert json.loads(service.config.read_text())["timelimit"] == 1, "the other keys are kept"

    service.edit(enable=1, timelimit=0, profiler_step_num=5)
    wait_until(
        lambda: json.loads(service.config.read_text())["enable"] == 0, what="the step-limit write-back"
    )
    wait_until(lambda: not service.recording(), what="recording to stop")
    forward = rows(db, f"SELECT count(*) FROM slice WHERE name = 'forward' AND timestamp > {last}")[0][0]
    assert 5 <= forward <= 5 + 2, "stopped at the 5th prof_step() (a worker may finish the step it is in)"


def test_domain_and_level_filter_what_is_recorded(service):
    job = service.start()
    service.edit(enable=1, domain="Request", profiler_level="ERROR")
    wait_until(service.recording, what="recording to start")
    served(job)
    service.edit(enable=0)
    wait_until(lambda: not service.recording(), what="recording to stop")
    (db,) = service.dbs()
    assert stored_events(db) == 0, "INFO markers are above an ERROR level"
    service.edit(enable=1, profiler_level="INFO")
    wait_until(service.recording, what="recording to start")
    served(job)
    service.edit(enable=0)
    wait_until(lambda: not service.recording(), what="recording to stop")
    assert rows(db, "SELECT DISTINCT cat FROM slice") == [("Request",)], "ModelExecute is outside the domains"


def test_invalid_json_and_a_deleted_file_keep_the_state(service):
    job = service.start()
    service.edit(enable=1)
    wait_until(service.recording, what="recording to start")
    service.write('{"enable": 0, oops')
    wait_until(lambda: "not valid JSON" in service.log(), what="the invalid file to be noticed")
    service.config.unlink()
    wait_until(lambda: "cannot read" in service.log(), what="the deletion to be noticed")
    (db,) = service.dbs()
    recorded = stored_events(db)
    served(job)
    wait_until(lambda: stored_events(db) > recorded, what="recording to go on")
    service.write(json.dumps({"enable": 0}))
    wait_until(lambda: not service.recording(), what="recording to stop")
    assert job.proc is not None and job.proc.poll() is None, "the service never noticed"


def test_two_processes_share_one_dated_folder_and_export_as_one_trace(service, tmp_path):
    jobs = [service.start(), service.start()]
    service.edit(enable=1)
    wait_until(lambda: len(service.dbs()) == 2 and service.recording(), what="both to record")
    for job in jobs:
        served(job)
    service.edit(enable=0)
    wait_until(lambda: not service.recording(), what="recording to stop")
    first, second = service.dbs()
    assert first.parent == second.parent
    assert {db.name for db in service.dbs()} == {f"ms_service_{os.uname().nodename}-{j.pid}.db" for j in jobs}

    out = tmp_path / "out"
    result = dyno(
        *("service", "export", "--input-path", str(service.prof_dir), "--output-path", str(out)),
        *("--format", "json", "csv", "db"),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    trace = json.loads((out / "chrome_tracing.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in trace if e.get("name") == "process_name"}
    # each process its own, named by its role as the analyser names it (its Request marks: a scheduler)
    assert names == {j.pid: "schedule" for j in jobs}
    assert {e["ph"] for e in trace} >= {"X", "I", "s", "f"}, "spans, events, request flows"
    requests = list(csv.DictReader((out / "request.csv").open()))
    recorded = sum(
        rows(db, "SELECT count(*) FROM slice WHERE name = 'httpReq'")[0][0] for db in service.dbs()
    )
    assert len(requests) == recorded and all(r["recv_token_size"] == "16.0" for r in requests)
    forwards = list(csv.DictReader((out / "forward.csv").open())) if (out / "forward.csv").exists() else []
    assert not forwards, "no batch spans: forward.csv needs them, as the analyser's"
    assert "not written:" in result.stderr and "forward.csv: no rows" in result.stderr
    assert rows(out / "profiler.db", "SELECT count(DISTINCT pid) FROM slice") == [(2,)]


@pytest.mark.torch
def test_torch_mode_writes_a_torch_trace_into_the_dated_folder(service):
    service.start("--torch")
    db = service.record_some(acl_task_time=3, host_system_usage_freq=20)
    (trace,) = service.prof_dir.glob("*/torch_*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "aten::linear" for e in events), "the serving threads' operators"
    assert rows(db, "SELECT count(*) > 0 FROM counter WHERE cat = 'host' AND name = 'cpuUsage'") == [(1,)]


def test_mspti_mode_records_operators_from_the_fake_library(tmp_path, start_workload):
    library = fake_mspti_build.shared_library()
    service = Service(
        tmp_path,
        start_workload,
        {
            "MSMONITOR_MSPTI_LIB": library,
            **fake_mspti_build.settings(count=200, names=5, devices=1, start_kinds=2),
        },
    )
    service.start()
    service.record_some(acl_task_time=2, kernel_filter="Kernel_1;Kernel_2")
    (db,) = service.dbs("ascend_service_profiler")
    kernels = rows(db, "SELECT DISTINCT name FROM kernel ORDER BY name")
    assert kernels == [("Kernel_1",), ("Kernel_2",)], "kept by kernel_filter"
    assert rows(db, "SELECT count(*) > 0 FROM api") == [(1,)]


def test_with_the_daemon_the_state_shows_and_a_dynamic_window_is_refused_while_operators_run(
    start_daemon, tmp_path, start_workload
):
    daemon: Daemon = start_daemon("--process-keepalive-s", "3")
    service = Service(tmp_path, start_workload, daemon.client_env())
    job = service.start("--torch")
    wait_until(lambda: (daemon.process(job.pid) or {}).get("service") == "off", what="registration")
    service.edit(enable=1, acl_task_time=3)
    wait_until(lambda: (daemon.process(job.pid) or {}).get("service", "").startswith("on since"), what="on")
    assert "SERVICE" in daemon.dyno("processes", expect=0).stdout
    started = daemon.dyno(
        "--json",
        "dynamic",
        "--pid",
        str(job.pid),
        "--output",
        str(tmp_path / "prof-dyn"),
        input="start\nquit\n",
    )
    answer = json.loads(started.stdout.splitlines()[1])
    # Refused, naming the holder: by the daemon, which the hello told, or (a hello built in the instant
    # between the switch turning on and taking the slot) by the process.
    assert not answer["ok"]
    assert "the service profiler's operator collection (acl_task_time 3)" in answer["message"]
    service.edit(enable=0)
    wait_until(lambda: (daemon.process(job.pid) or {}).get("service") == "off", what="off again")


@pytest.fixture(scope="session")
def msserviceprofiler() -> Path:
    """The published msserviceprofiler wheel (its vLLM hooks import ``ms_service_profiler``), unpacked."""
    return peers.need(peers.MSSERVICEPROFILER_PEER)


def test_the_vllm_hooks_of_msserviceprofiler_run_unchanged(service, msserviceprofiler, tmp_path):
    """Code nobody here wrote: the package's vLLM v1 request hooks, calling ms_service_profiler's API."""
    script = tmp_path / "hooks.py"
    script.write_text(
        "import asyncio, types\n"
        "from msserviceprofiler.vllm_profiler.vllm_v1 import request_hookers as hooks\n"
        "async def add_request(this, request_id, prompt): return request_id\n"
        "for rid in ('r1', 'r2'):\n"
        "    asyncio.run(hooks.add_request_async(add_request, None, rid, 'hello'))\n"
        "stats = types.SimpleNamespace(num_generation_tokens=7)\n"
        "state = types.SimpleNamespace(prompt_token_ids=[1, 2, 3], stats=stats)\n"
        "this = types.SimpleNamespace(request_states={'r1': state})\n"
        "output = types.SimpleNamespace(request_id='r1', finish_reason='stop')\n"
        "hooks.process_outputs(lambda this, outputs: outputs, this, [output])\n"
    )
    service.write(json.dumps({"enable": 1, "prof_dir": str(service.prof_dir)}))
    env = {**os.environ, **service.env, "PYTHONPATH": str(msserviceprofiler)}
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    (db,) = service.dbs()
    events = [(m["name"], m["domain"], m["message"].get("rid")) for m in marks(db, "duration = 0")]
    assert [e for e in events if e[0] in ("httpReq", "tokenize")] == [
        ("httpReq", "Engine", "r1"),
        ("tokenize", "Engine", "r1"),
        ("httpReq", "Engine", "r2"),
        ("tokenize", "Engine", "r2"),
    ]
    assert ("httpRes", "Engine", "r1") in events and ("detokenize", "Engine", ["r1"]) in events
    r1 = {k: v for m in marks(db) if m["message"].get("rid") == "r1" for k, v in m["message"].items()}
    assert (r1["recvTokenSize="], r1["replyTokenSize="]) == (3, 7)
