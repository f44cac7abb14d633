"""`dyno service export`: a prof_dir of service profiler databases, as the plugin writes them, turned into
a Chrome trace, CSV tables and one SQLite database, offline (no daemon)."""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import pytest

from dyno.service_export import model
from harness import BIN
from msmonitor_plugin.service_profiler import schema

T0 = 1_700_000_000_000_000_000  # epoch ns
MS = 1_000_000
PY_TID = 140_654_292_227_776  # a Python thread ident: beyond the 32 bits Perfetto reads a tid in
# The tables as the plugin creates them.
SERVICE_SCHEMA = ";\n".join(table.create() for table in schema.SERVICE_TABLES)
OPERATOR_SCHEMA = ";\n".join(table.create() for table in schema.OPERATOR_TABLES)
Rows = Dict[str, Sequence[Tuple[Any, ...]]]
FRONTEND: Rows = {  # nodeA-100: receives request r1 and answers it
    "meta": [("hostname", "nodeA", T0), ("pid", "100", T0), ("role", "frontend", T0)],
    "events": [
        ("httpReq", "Request", T0, 11, "r1", '{"path":"/generate"}'),
        ("httpRes", "Request", T0 + 5 * MS, 11, "r1", "{}"),
    ],
    "metrics": [
        ("recvTokenSize", "Request", T0, 11, "r1", 12.0, "set", "req"),
        ("replyTokenSize", "Request", T0 + 3 * MS, 11, "r1", 1.0, "inc", "req"),
        ("replyTokenSize", "Request", T0 + 4 * MS, 11, "r1", 1.0, "inc", "req"),
    ],
}
ENGINE: Rows = {  # nodeA-200: runs r1 alone, then r1 and r2 in a batch
    "meta": [("hostname", "nodeA", T0), ("pid", "200", T0)],
    "spans": [
        ("forward", "ModelExecute", T0 + 1 * MS, T0 + 3 * MS, 21, "r1", '{"tokens":12}'),
        ("batch", "BatchSchedule", T0 + 2 * MS, T0 + 4 * MS, PY_TID, '["r1","r2"]', '{"size":2}'),
    ],
    "metrics": [("queueSize", "BatchSchedule", T0 + 2 * MS, 22, "", 3.0, "set", "")],
    "links": [("r1", "r2", "BatchSchedule", T0 + 2 * MS)],
}
OPERATORS: Rows = {  # operator timing of nodeA-200
    "api": [("aclnnMatmul", T0 + 1 * MS, T0 + 2 * MS, 21, 7)],
    "kernel": [("MatMul", "AI_CORE", T0 + 2 * MS, T0 + 2 * MS + 500, 0, 2, 7)],
}
OTHER_HOST: Rows = {  # nodeB-100, recorded later: no meta rows, so host and pid come from the file name
    "events": [("httpReq", "Request", T0 + 10 * MS, 31, "r3", "{}")],
    "spans": [("prefill", "ModelExecute", T0 + 11 * MS, T0 + 12 * MS, 32, "r3", "{}")],
}


def make_db(path: Path, schema: str, rows: Rows) -> None:
    """A database as the plugin leaves it once recording stopped: WAL mode, cleanly closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(schema)
    for table, values in rows.items():
        for row in values:
            db.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", row)
    db.commit()
    db.close()


@pytest.fixture
def prof_dir(tmp_path: Path) -> Path:
    root = tmp_path / "prof"
    first, second = root / "0101-1200" / "Trace_Service", root / "0101-1300" / "Trace_Service"
    make_db(first / "ms_service_nodeA-100.db", SERVICE_SCHEMA, FRONTEND)
    make_db(first / "ms_service_nodeA-200.db", SERVICE_SCHEMA, ENGINE)
    make_db(first / "ascend_service_profiler_nodeA-200.db", OPERATOR_SCHEMA, OPERATORS)
    make_db(second / "ms_service_nodeB-100.db", SERVICE_SCHEMA, OTHER_HOST)
    return root


def dyno(*args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([str(BIN / "dyno"), *args], capture_output=True, text=True, timeout=60)


def export(prof_dir: Path, out: Path, *args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return dyno("service", "export", "--input-path", str(prof_dir), "--output-path", str(out), *args)


def read_csv(path: Path) -> List[Dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def exported(prof_dir: Path, tmp_path: Path) -> Iterator[Tuple[Path, subprocess.CompletedProcess]]:  # type: ignore[type-arg]
    out = tmp_path / "out"
    result = export(prof_dir, out)
    assert result.returncode == 0, result.stderr
    yield out, result


def test_writes_every_format_and_says_what_it_read(exported, prof_dir: Path):
    out, result = exported
    names = ["chrome_tracing.json", "request.csv", "span.csv", "metric.csv", "profiler.db"]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # no temporary file left
    assert result.stdout.splitlines() == [f"wrote {out / name}" for name in names]
    engine = prof_dir / "0101-1200" / "Trace_Service" / "ms_service_nodeA-200.db"
    assert f"read 2 spans, 0 events, 1 metrics from {engine}\n" in result.stderr
    operators = engine.with_name("ascend_service_profiler_nodeA-200.db")
    assert f"read 1 api calls, 1 kernels from {operators}\n" in result.stderr
    assert len(result.stderr.splitlines()) == 4
    # reading left the inputs as they were: no -wal or -shm beside them
    assert not [p for p in prof_dir.rglob("*") if p.name.endswith(("-wal", "-shm"))]


def test_chrome_trace_has_processes_slices_instants_counters_and_operators(exported):
    out, _ = exported
    trace = json.loads((out / "chrome_tracing.json").read_text())
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    names = {e["args"]["name"]: e["pid"] for e in events if e["name"] == "process_name"}
    assert set(names) == {"nodeA-100", "nodeA-200", "nodeB-100"}
    assert names["nodeA-100"] == 100 and names["nodeA-200"] == 200
    assert names["nodeB-100"] not in (100, 200)  # another host's pid 100: a pid of its own in the trace

    by_name = {e["name"]: e for e in events if e["ph"] in "XiC"}
    forward = by_name["forward"]
    assert forward["ph"] == "X" and forward["pid"] == 200 and forward["tid"] == 21
    assert forward["ts"] == (T0 + MS) / 1000 and forward["dur"] == 2000
    assert forward["args"] == {"domain": "ModelExecute", "rid": "r1", "attrs": {"tokens": 12}}
    batch = by_name["batch"]
    assert batch["args"]["rid"] == ["r1", "r2"]
    assert batch["tid"] == 2_000_000  # a lane of its own, named after the thread
    names = [e["args"]["name"] for e in events if e["name"] == "thread_name" and e["tid"] == batch["tid"]]
    assert names == [f"thread {PY_TID}"]
    request = next(e for e in events if e["name"] == "httpReq" and e["args"]["rid"] == "r1")
    assert request["ph"] == "i" and request["s"] == "t" and request["pid"] == 100
    assert request["args"]["attrs"] == {"path": "/generate"}

    counters = [e for e in events if e["ph"] == "C" and e["name"] == "replyTokenSize"]
    assert [c["args"] for c in counters] == [{"replyTokenSize": 1.0}, {"replyTokenSize": 2.0}]  # inc adds
    assert by_name["queueSize"]["ph"] == "C" and by_name["queueSize"]["args"] == {"queueSize": 3.0}

    kernel = by_name["MatMul"]
    assert kernel["ph"] == "X" and kernel["pid"] == 200 and kernel["tid"] == 1_000_002
    lanes = [e for e in events if e["name"] == "thread_name" and e["tid"] == 1_000_002]
    assert lanes[0]["args"] == {"name": "device 0 stream 2"}
    assert by_name["aclnnMatmul"]["tid"] == 21


def test_each_request_is_one_flow_across_processes(exported):
    out, _ = exported
    events = json.loads((out / "chrome_tracing.json").read_text())["traceEvents"]
    flows: Dict[Any, List[Dict[str, Any]]] = {}
    for e in events:
        if e["ph"] in "stf":
            assert e["cat"] == "request"
            flows.setdefault(e["id"], []).append(e)
    by_rid = {steps[0]["name"]: steps for steps in flows.values()}
    assert set(by_rid) == {"r1", "r3"}  # r2 was only ever part of a batch
    r1 = by_rid["r1"]
    assert [(f["ph"], f["pid"], f["tid"], f["ts"]) for f in r1] == [
        ("s", 100, 11, T0 / 1000),  # httpReq
        ("t", 200, 21, (T0 + MS) / 1000),  # forward
        ("f", 100, 11, (T0 + 5 * MS) / 1000),  # httpRes
    ]
    assert r1[-1]["bp"] == "e"
    assert [f["ph"] for f in by_rid["r3"]] == ["s", "f"]


def test_csv_tables(exported):
    out, _ = exported
    requests = read_csv(out / "request.csv")
    assert [r["rid"] for r in requests] == ["r1", "r3"]
    r1, r3 = requests
    assert r1 == {
        "rid": "r1",
        "first_ns": str(T0),
        "last_ns": str(T0 + 5 * MS),
        "duration_ms": "5.0",
        "events": "2",
        "spans": "1",
        "processes": "2",
        "recvTokenSize": "12.0",
        "replyTokenSize": "2.0",  # two increments of 1
    }
    assert r3["processes"] == "1" and r3["recvTokenSize"] == "" and r3["duration_ms"] == "2.0"

    spans = read_csv(out / "span.csv")
    assert list(spans[0]) == [
        "host", "pid", "tid", "domain", "name", "rid", "start_ns", "end_ns", "duration_ms", "attrs",
    ]  # fmt: skip
    assert [(s["host"], s["pid"], s["name"]) for s in spans] == [
        ("nodeA", "200", "forward"),
        ("nodeA", "200", "batch"),
        ("nodeB", "100", "prefill"),
    ]
    assert spans[1]["rid"] == '["r1","r2"]' and spans[1]["duration_ms"] == "2.0"

    metrics = read_csv(out / "metric.csv")
    assert list(metrics[0]) == [
        "host",
        "pid",
        "tid",
        "domain",
        "name",
        "rid",
        "ts_ns",
        "value",
        "kind",
        "scope",
    ]
    assert [(m["name"], m["kind"], m["scope"]) for m in metrics] == [
        ("recvTokenSize", "set", "req"),
        ("queueSize", "set", ""),
        ("replyTokenSize", "inc", "req"),
        ("replyTokenSize", "inc", "req"),
    ]


def test_profiler_db_merges_every_process(exported):
    out, _ = exported
    db = sqlite3.connect(out / "profiler.db")
    try:
        count = {
            table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("meta", "spans", "events", "metrics", "links", "api", "kernel")
        }
        assert count == {"meta": 5, "spans": 3, "events": 3, "metrics": 4, "links": 1, "api": 1, "kernel": 1}
        hosts = db.execute("SELECT DISTINCT host, pid FROM spans ORDER BY host, pid").fetchall()
        assert hosts == [("nodeA", 200), ("nodeB", 100)]
        assert db.execute("SELECT host, pid, name, device, stream FROM kernel").fetchall() == [
            ("nodeA", 200, "MatMul", 0, 2)
        ]
        columns = [row[1] for row in db.execute("PRAGMA table_info(spans)")]
        assert columns == ["host", "pid", "name", "domain", "start_ns", "end_ns", "tid", "rid", "attrs"]
    finally:
        db.close()


@pytest.mark.parametrize(
    ("formats", "files"),
    [
        (["--format", "csv"], {"request.csv", "span.csv", "metric.csv"}),
        (["--format", "json,db"], {"chrome_tracing.json", "profiler.db"}),
        (["--format", "json", "db"], {"chrome_tracing.json", "profiler.db"}),  # as MindIE's parse takes it
        (["--format", "db", "--format", "json"], {"chrome_tracing.json", "profiler.db"}),
    ],
)
def test_format_chooses_the_files(prof_dir: Path, tmp_path: Path, formats: List[str], files: set):
    out = tmp_path / "out"
    result = export(prof_dir, out, *formats)
    assert result.returncode == 0, result.stderr
    assert {p.name for p in out.iterdir()} == files


def test_bad_format_is_a_usage_error(prof_dir: Path, tmp_path: Path):
    for args in (["--format", "pdf"], ["--format", "json", "pdf"], ["json"]):
        result = export(prof_dir, tmp_path / "out", *args)
        assert result.returncode == 2, args
    assert not (tmp_path / "out").exists()


def test_json_prints_a_summary_and_no_progress(prof_dir: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = export(prof_dir, out, "--format", "csv", "--json")
    assert result.returncode == 0 and result.stderr == ""
    summary = json.loads(result.stdout)
    assert summary["processes"] == ["nodeA-100", "nodeA-200", "nodeB-100"]
    assert summary["rows"]["spans"] == 3 and summary["requests"] == 2
    assert summary["written"] == [str(out / n) for n in ("request.csv", "span.csv", "metric.csv")]


def test_a_database_still_being_written_is_refused(prof_dir: Path, tmp_path: Path):
    path = prof_dir / "0101-1300" / "Trace_Service" / "ms_service_nodeB-100.db"
    writer = sqlite3.connect(path)  # a recording process, still connected: its -wal file exists
    try:
        writer.execute("INSERT INTO events VALUES ('later', 'Request', 0, 1, '', '{}')")
        writer.commit()
        assert path.with_name(path.name + "-wal").exists()
        result = export(prof_dir, tmp_path / "out")
    finally:
        writer.close()
    assert result.returncode == 1
    assert f"{path}: still being written (its -wal file exists)" in result.stderr
    assert '"enable": 0' in result.stderr
    assert not (tmp_path / "out").exists()


def test_nothing_to_export_says_where_it_looked(tmp_path: Path):
    (tmp_path / "empty" / "0101-1200").mkdir(parents=True)
    result = export(tmp_path / "empty", tmp_path / "out")
    assert result.returncode == 1
    assert f"no recording under {tmp_path / 'empty'}" in result.stderr
    assert not (tmp_path / "out").exists()
    assert export(tmp_path / "missing", tmp_path / "out").returncode == 1


def loaded(modules: str, *args: str) -> List[str]:
    """Which of the comma-separated *modules* `dyno ARGS` imported."""
    probe = (
        "import sys\nfrom dyno.main import main\n"
        "try:\n    main(sys.argv[2:])\nexcept SystemExit:\n    pass\n"
        "print(*sorted(set(sys.argv[1].split(',')) & set(sys.modules)), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, modules, *args], capture_output=True, text=True, timeout=60
    )
    return result.stderr.splitlines()[-1].split()


def test_exporting_needs_no_grpc_and_help_no_sqlite(prof_dir: Path, tmp_path: Path):
    args = ("service", "export", "--input-path", str(prof_dir), "--output-path", str(tmp_path / "out"))
    assert loaded("grpc,google,cryptography", "--json", *args) == []
    assert (tmp_path / "out" / "profiler.db").exists()
    assert loaded("sqlite3,csv,dyno.commands.service", "--help") == []


def test_each_row_type_has_its_tables_columns_in_order():
    """The exporter's rows are the plugin's schema: profiler.db and the readers name fields after it."""
    for table in schema.TABLES.values():
        fields = model.ROW_TYPES[table.name].__dataclass_fields__
        assert list(fields) == ["process", *table.column_names], table.name
        assert isinstance(getattr(model.Recording(), table.name), list)
