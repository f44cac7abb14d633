"""`dyno service export`: a prof_dir of service profiler databases — MindIE 26.0's layout (as the plugin
writes it), MindIE 8.3's and this project's earlier one — turned into the files MindIE's analyser writes,
offline (no daemon). The fixtures are written here from the published table definitions (the plugin's
schema) and message format; the expected rows are worked out by hand from the analyser's rules."""

from __future__ import annotations

import csv
import datetime
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import pytest

from harness import Completed, dyno, read_line_until
from msmonitor_contract import service_tables

# Epoch ns: 1970-01-12 21:46:40 in Shanghai, the analyser's time zone; below 2**53, so that the floats
# the analyser computes in are exact and the expected figures can be worked out by hand.
T0 = 1_000_000_000_000_000
MS = 1_000_000
T0_US = T0 // 1000
Mark = Tuple[
    str, str, float, float, int, Dict[str, Any]
]  # name, domain, start (ms after T0), duration, tid, message


def when(ms_after: float) -> str:
    return f"1970-01-12 21:46:40:{int(ms_after * 1000):06d}"


def write_26(path: Path, host: str, marks: Sequence[Mark], meta: Sequence[Tuple[str, str]] = ()) -> None:
    """A MindIE 26.0 recording: slice rows as its writer makes them (track = tid, end = start + duration)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pid = int(path.stem.rpartition("-")[2])
    db = sqlite3.connect(path)
    for table in service_tables.SERVICE_TABLES:
        db.execute(table.create())
    db.executemany(service_tables.META.insert(), [("hostname", host, ""), *((k, v, "") for k, v in meta)])
    for name, domain, start, duration, tid, message in marks:
        ts, dur = T0 + int(start * MS), int(duration * MS)
        row = (ts, dur, name, 0, tid, domain, json.dumps(message), "", ts + dur, "", pid, tid)
        db.execute(service_tables.SLICE.insert(), row)
    db.commit()
    db.close()


def write_83(path: Path, host: str, rows: Sequence[Tuple[str, int, float, float, int]]) -> None:
    """A MindIE 8.3 recording: Mstx (message, flag 1 mark / 2 span, ...) and Meta(name, value)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute(service_tables.MSTX.create())
    db.execute(service_tables.META_83.create())
    db.execute(service_tables.META_83.insert(), ("hostname", host))
    for i, (message, flag, start, duration, tid) in enumerate(rows):
        ts = T0 + int(start * MS)
        db.execute(service_tables.MSTX.insert(), (message, flag, i, ts, ts + int(duration * MS), 300, tid))
    db.commit()
    db.close()


def write_legacy(path: Path) -> None:
    """This project's earlier layout: events and metrics in tables of their own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    for table in service_tables.LEGACY_TABLES:
        db.execute(table.create())
    db.execute("INSERT INTO meta VALUES ('hostname', 'nodeC', ?)", (T0,))
    db.execute("INSERT INTO events VALUES ('httpReq', 'Request', ?, 31, 'r5', '{}')", (T0 + 40 * MS,))
    db.execute(
        "INSERT INTO metrics VALUES ('recvTokenSize', 'Request', ?, 31, 'r5', 9, 'set', 'req')",
        (T0 + 40 * MS,),
    )
    db.execute("INSERT INTO events VALUES ('httpRes', 'Request', ?, 31, 'r5', '{}')", (T0 + 45 * MS,))
    db.execute(
        "INSERT INTO metrics VALUES ('replyTokenSize', 'Request', ?, 31, 'r5', 1, 'inc', 'req')",
        (T0 + 45 * MS,),
    )
    db.commit()
    db.close()


def res(iteration: int) -> List[Dict[str, Any]]:
    return [{"rid": "r1", "iter": iteration}, {"rid": "r2", "iter": iteration}]


def queue(size: int) -> Dict[str, Any]:
    return {"scope#QueueName": "WAITING", "QueueSize=": size, "type": 0}


FRONTEND: List[Mark] = [  # nodeA-100: receives r1 and r2 and answers them
    ("httpReq", "Request", 0, 0, 11, {"rid": "r1", "recvTokenSize=": 12, "type": 0}),
    ("httpReq", "Request", 1, 0, 11, {"rid": "r2", "recvTokenSize=": 7, "type": 0}),
    ("httpRes", "Request", 20, 0, 11, {"rid": "r1", "replyTokenSize=": 3, "type": 0}),
    ("httpRes", "Request", 30, 0, 11, {"rid": "r2", "replyTokenSize=": 5, "type": 0}),
]
ENGINE: List[Mark] = [  # nodeA-200: queues them, then runs them together, a prefill and a decode
    ("Enqueue", "Schedule", 2, 0, 21, {"rid": "r1", **queue(1)}),
    ("Enqueue", "Schedule", 3, 0, 21, {"rid": "r2", **queue(2)}),
    ("Dequeue", "Schedule", 4, 0, 21, {"rid": "r1", **queue(1)}),
    ("Dequeue", "Schedule", 5, 0, 21, {"rid": "r2", **queue(0)}),
    ("KVCacheStatus", "Schedule.KVCache", 5, 0, 21,
     {"total_blocks": 100, "used_blocks": 10, "free_blocks": 90, "kvcache_usage_rate": 0.1, "type": 0}),
    ("BatchSchedule", "Schedule", 5, 1, 21,
     {"rid": res(0), "batch_size": 2, "batch_type": "Prefill", "type": 2}),
    ("forward", "ModelExecute", 6.5, 3, 22, {"rid": res(0), "type": 2}),
    ("modelExec", "ModelExecute", 6, 4, 22, {"rid": res(0), "batch_size": 2, "type": 2}),
    ("BatchSchedule", "Schedule", 11, 1, 21,
     {"rid": res(1), "batch_size": 2, "batch_type": "Decode", "type": 2}),
    ("forward", "ModelExecute", 12.5, 2, 22, {"rid": res(1), "type": 2}),
    ("modelExec", "ModelExecute", 12, 3, 22, {"rid": res(1), "batch_size": 2, "type": 2}),
]  # fmt: skip
MINDIE_83 = [  # nodeB-300: r3 as 8.3's JSON, r4 in its older quoting (^ for ", no braces)
    ('{"domain": "Request", "name": "httpReq", "rid": "r3", "recvTokenSize=": 4, "type": 0}', 1, 50, 0, 41),
    ('{"domain": "Request", "name": "httpRes", "rid": "r3", "replyTokenSize=": 2, "type": 0}', 1, 52, 0, 41),
    ("^domain^:^Request^,^name^:^httpReq^,^rid^:^r4^,^recvTokenSize=^:6,", 1, 53, 0, 41),
    ('{"domain": "Request", "name": "httpRes", "rid": "r4", "replyTokenSize=": 1, "type": 0}', 1, 60, 0, 41),
    ('{"domain": "ModelExecute", "name": "forward", "rid": ["r3"], "type": 2}', 2, 51, 0.5, 42),
]


@pytest.fixture
def prof_dir(tmp_path: Path) -> Path:
    root = tmp_path / "prof"
    trace = root / "1115-0613" / "Trace_Service"
    write_26(trace / "ms_service_nodeA-100.db", "nodeA", FRONTEND)
    write_26(trace / "ms_service_nodeA-200.db", "nodeA", ENGINE, meta=[("dpRankId", "0")])
    operators = sqlite3.connect(trace / "ascend_service_profiler_nodeA-200.db")
    for table in service_tables.OPERATOR_TABLES:
        operators.execute(table.create())
    operators.execute(service_tables.API.insert(), ("aclnnMatmul", T0 + 7 * MS, T0 + 8 * MS, 22, 1))
    operators.execute(
        service_tables.KERNEL.insert(), ("MatMul", "KERNEL_AICORE", T0 + 8 * MS, T0 + 9 * MS, 0, 2, 1)
    )
    operators.commit()
    operators.close()
    write_83(root / "1115-0614" / "ms_service_nodeB-300.db", "nodeB", MINDIE_83)  # 8.3: no Trace_Service
    write_legacy(root / "1115-0615" / "Trace_Service" / "ms_service_nodeC-400.db")
    return root


def export(prof_dir: Path, out: Path, *args: str) -> Completed:
    return dyno("service", "export", "--input-path", str(prof_dir), "--output-path", str(out), *args)


def read_csv(path: Path) -> List[Dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def header(path: Path) -> List[str]:
    return path.read_text().splitlines()[0].split(",")


@pytest.fixture
def exported(prof_dir: Path, tmp_path: Path) -> Iterator[Tuple[Path, subprocess.CompletedProcess]]:  # type: ignore[type-arg]
    out = tmp_path / "out"
    result = export(prof_dir, out, "--summary")
    assert result.returncode == 0, result.stderr
    yield out, result


CSVS = ["request.csv", "batch.csv", "forward.csv", "kvcache.csv", "request_status.csv"]
SUMMARIES = ["request_summary.csv", "batch_summary.csv", "service_summary.csv"]


def test_writes_the_analysers_files_and_says_what_it_read(exported, prof_dir: Path):
    out, result = exported
    names = ["chrome_tracing.json", *CSVS, "profiler.db", *SUMMARIES]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # no temporary file left
    assert result.stdout.splitlines() == [f"wrote {out / name}" for name in names]
    engine = prof_dir / "1115-0613" / "Trace_Service" / "ms_service_nodeA-200.db"
    assert f"read 5 events, 6 spans, 0 counters (mindie-26.0) from {engine}\n" in result.stderr
    mindie_83 = prof_dir / "1115-0614" / "ms_service_nodeB-300.db"
    assert f"read 4 events, 1 spans, 0 counters (mindie-8.3) from {mindie_83}\n" in result.stderr
    assert "(msmonitor) from" in result.stderr
    operators = engine.with_name("ascend_service_profiler_nodeA-200.db")
    assert f"read 1 api calls, 1 kernels from {operators}\n" in result.stderr
    # reading left the inputs as they were: no -wal or -shm beside them
    assert not [p for p in prof_dir.rglob("*") if p.name.endswith(("-wal", "-shm"))]


def test_request_csv(exported):
    out, _ = exported
    assert header(out / "request.csv") == [
        "http_rid", "start_datetime", "recv_token_size", "reply_token_size", "execution_time(ms)",
        "queue_wait_time(ms)", "first_token_latency(ms)", "cache_hit_rate", "start_time(ms)",
    ]  # fmt: skip
    rows = {r["http_rid"]: list(r.values())[1:] for r in read_csv(out / "request.csv")}
    start = T0_US // 1000
    assert rows == {
        # queue wait: Dequeue - Enqueue; first token: from httpReq to the end of its prefill modelExec;
        # a figure a request lacks is 0.0, as the analyser fills its float column
        "r1": [when(0), "12.0", "3.0", "20.0", "2.0", "10.0", "N/A", f"{start}.0"],
        "r2": [when(1), "7.0", "5.0", "29.0", "2.0", "9.0", "N/A", f"{start + 1}.0"],
        "r3": [when(50), "4.0", "2.0", "2.0", "0.0", "0.0", "N/A", f"{start + 50}.0"],  # MindIE 8.3's
        "r4": [when(53), "6.0", "1.0", "7.0", "0.0", "0.0", "N/A", f"{start + 53}.0"],  # 8.3's ^ quoting
        "r5": [when(40), "9.0", "1.0", "5.0", "0.0", "0.0", "N/A", f"{start + 40}.0"],  # the older layout
    }
    assert list(rows) == ["r1", "r2", "r5", "r3", "r4"], "by start time"


def test_batch_csv(exported):
    out, _ = exported
    assert header(out / "batch.csv") == [
        "name", "res_list", "start_datetime", "end_datetime", "during_time(ms)", "batch_type", "prof_id",
        "batch_size", "total_blocks", "used_blocks", "free_blocks", "kvcache_usage_rate",
        "prefill_batch_size", "decode_batch_size", "prefill_scheduled_tokens", "decode_scheduled_tokens",
        "total_scheduled_tokens", "dp_rank", "start_time(ms)", "end_time(ms)",
    ]  # fmt: skip
    rows = [list(r.values()) for r in read_csv(out / "batch.csv")]
    prof = "ms_service_nodeA-200"
    kv = ["100", "10", "90", "0.1"]  # the KVCacheStatus nearest the schedule span
    # batch_type as given, else from the members' iterations; batch_size counts the members
    none = ["0", "0", "0", "0"]
    assert rows == [
        ["BatchSchedule", str(res(0)), when(5), when(6), "1.0", "Prefill", prof, "2.0", *kv,
         "2", "0", "0", "0", "0", "0", f"{T0_US + 5000}.0", f"{T0_US + 6000}.0"],
        ["modelExec", str(res(0)), when(6), when(10), "4.0", "Prefill", prof, "2.0", *none,
         "2", "0", "0", "0", "0", "0", f"{T0_US + 6000}.0", f"{T0_US + 10000}.0"],
        ["BatchSchedule", str(res(1)), when(11), when(12), "1.0", "Decode", prof, "2.0", *kv,
         "0", "2", "0", "0", "0", "0", f"{T0_US + 11000}.0", f"{T0_US + 12000}.0"],
        ["modelExec", str(res(1)), when(12), when(15), "3.0", "Decode", prof, "2.0", *none,
         "0", "2", "0", "0", "0", "0", f"{T0_US + 12000}.0", f"{T0_US + 15000}.0"],
    ]  # fmt: skip


def test_forward_csv(exported):
    out, _ = exported
    rows = read_csv(out / "forward.csv")
    assert list(rows[0]) == [
        "name", "relative_start_time(ms)", "start_datetime", "end_datetime", "during_time(ms)",
        "bubble_time(ms)", "batch_size", "batch_type", "forward_iter", "dp_rank", "prof_id", "hostname",
        "start_time(ms)", "end_time(ms)",
    ]  # fmt: skip
    engine = [r for r in rows if r["prof_id"] == "ms_service_nodeA-200"]
    # dp_rank: the analyser's forward rows read a dp_rank the marks or meta name, never dpRankId
    assert [
        (r["forward_iter"], r["during_time(ms)"], r["bubble_time(ms)"], r["dp_rank"], r["batch_type"])
        for r in engine
    ] == [
        ("1", "3.0", "3.0", "", "Prefill"),  # the next forward starts 3 ms after this one ends
        ("2", "2.0", "", "", "Decode"),  # typed as the BatchSchedule before it of its requests
    ]
    # nodeB's forward has no batch type and no schedule span of its requests: not kept, as the analyser
    assert {r["prof_id"] for r in rows} == {"ms_service_nodeA-200"}
    assert [r["relative_start_time(ms)"] for r in engine] == ["0.0", "6.0"]
    assert engine[0]["start_time(ms)"] == f"{T0_US // 1000 + 6.5}" and engine[0]["hostname"] == "nodeA"


def test_kvcache_and_request_status_csv(exported):
    out, _ = exported
    assert read_csv(out / "kvcache.csv") == [
        # cut to the second: with profiler.db written too, as the analyser cuts it
        {"name": "KVCacheStatus", "start_time": "1970-01-12 21:46:40", "total_blocks": "100",
         "used_blocks": "10", "free_blocks": "90", "blocks_allocated": "", "blocks_freed": "",
         "kvcache_usage_rate": "0.1"},
    ]  # fmt: skip
    status = [list(r.values()) for r in read_csv(out / "request_status.csv")]
    assert header(out / "request_status.csv") == [
        "hostuid", "pid", "start_datetime", "relative_timestamp(ms)", "waiting", "running", "swapped",
        "timestamp(ms)",
    ]  # fmt: skip
    start = T0_US // 1000
    assert status == [
        ["nodeA", "200", when(2), "0.0", "1.0", "", "", f"{start + 2}.0"],
        ["nodeA", "200", when(3), "1.0", "2.0", "", "", f"{start + 3}.0"],
        ["nodeA", "200", when(4), "2.0", "1.0", "", "", f"{start + 4}.0"],
        ["nodeA", "200", when(5), "3.0", "0.0", "", "", f"{start + 5}.0"],
    ]


def test_mindies_block_actions_make_the_other_kvcache_csv(tmp_path: Path):
    marks: List[Mark] = [
        ("Allocate", "KVCache", 1, 0, 5, {"rid": "r1", "deviceBlock=": 60, "type": 0}),
        ("Free", "KVCache", 2, 0, 5, {"rid": "r1", "deviceBlock=": 80, "type": 0}),
        ("httpReq", "Request", 0, 0, 5, {"rid": "r1", "type": 0}),
    ]
    write_26(tmp_path / "prof" / "d" / "Trace_Service" / "ms_service_h-1.db", "h", marks)
    result = export(tmp_path / "prof", tmp_path / "out", "--format", "csv")
    assert result.returncode == 0, result.stderr
    assert [list(r.values()) for r in read_csv(tmp_path / "out" / "kvcache.csv")] == [
        ["r1", "Allocate", when(1), "60.0", "0.25"],  # (80 - 60) / the most ever free
        ["r1", "Free", when(2), "80.0", "0.0"],
    ]
    for name in ("batch.csv", "forward.csv", "request_status.csv", "request.csv"):
        assert f"not written: {tmp_path / 'out' / name}: no rows: it needs" in result.stderr
    assert not (tmp_path / "out" / "batch.csv").exists()


def test_chrome_trace_draws_tracks_flows_through_batches_and_kv_counters(exported):
    out, _ = exported
    events = json.loads((out / "chrome_tracing.json").read_text())
    assert isinstance(events, list), "a JSON list, as the analyser writes"
    shown: Dict[int, Dict[str, Any]] = {}
    for e in events:
        if e["name"].startswith("process_"):  # process_sort_index, process_name, process_labels
            shown.setdefault(e["pid"], {}).update(e["args"])
    # named by role: Request marks make a scheduler, Execute marks a forward process, listed after them
    assert [(pid, shown[pid]) for pid in (100, 300, 400, 200)] == [
        (100, {"sort_index": 0, "name": "schedule", "labels": "nodeA"}),
        (300, {"sort_index": 1, "name": "schedule", "labels": "nodeB"}),
        (400, {"sort_index": 2, "name": "schedule", "labels": "nodeC"}),
        (200, {"sort_index": 3, "name": "forward", "labels": "nodeA,dp0"}),
    ]
    batch = next(e for e in events if e["name"] == "BatchSchedule")
    assert batch["ph"] == "X" and batch["tid"] == "Schedule(21)" and batch["pid"] == 200
    assert batch["ts"] == T0_US + 5000 and batch["dur"] == 1000
    assert batch["args"]["res_list"] == res(0) and batch["args"]["start_datetime"] == when(5)
    assert batch["args"]["batch_size"] == 2 and batch["args"]["tid"] == 21
    request = next(e for e in events if e["name"] == "httpReq" and e["args"]["rid"] == "r1")
    assert request["ph"] == "I" and request["dur"] == 0 and request["args"]["recvTokenSize="] == 12
    flow = [(e["ph"], e["tid"]) for e in events if e.get("id") == "r1" and e["ph"] in "stf"]
    assert flow == [
        ("s", "Request"),  # httpReq: one Request track a process
        *[("t", "Schedule(21)")] * 3,  # Enqueue, Dequeue, BatchSchedule
        ("t", "ModelExecute(22)"), ("t", "ModelExecute(22)"),  # modelExec, forward
        ("t", "Schedule(21)"), ("t", "ModelExecute(22)"), ("t", "ModelExecute(22)"),
        ("f", "Request"),  # httpRes
    ]  # fmt: skip
    kv = [e for e in events if e["ph"] == "C" and e["name"] == "KVCache"]
    assert [e["args"] for e in kv] == [{"total_blocks": 100.0, "used_blocks": 10.0, "free_blocks": 90.0}]
    kernel = next(e for e in events if e["name"] == "MatMul")
    assert kernel["ph"] == "X" and kernel["tid"] == "Kernel(device 0 stream 2)" and kernel["pid"] == 200


def test_profiler_db_has_the_analysers_tables_and_views(exported):
    out, _ = exported
    db = sqlite3.connect(out / "profiler.db")
    try:
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        views = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
        assert tables >= {"process", "thread", "slice", "counter", "flow", "request", "batch", "batch_req",
                          "batch_exec", "forward", "kvcache", "request_status", "data_table", "translate",
                          "api", "kernel", *CURVE_TABLES}  # fmt: skip
        assert db.execute("SELECT * FROM process ORDER BY process_sort_index").fetchall() == [
            ("100", "schedule", "nodeA", 0, ""), ("300", "schedule", "nodeB", 1, ""),
            ("400", "schedule", "nodeC", 2, ""), ("200", "forward", "nodeA,dp0", 3, ""),
        ]  # fmt: skip
        # a track's tid is its name in the trace; each request and KV-cache domain one track a process
        threads = db.execute("SELECT tid, pid, thread_name FROM thread WHERE pid = '200'").fetchall()
        assert threads == [(t, "200", t) for t in ("ModelExecute(22)", "Schedule(21)", "Schedule.KVCache")]
        assert views == {"request_data", "batch_info", "forward_info", "kvcache_usage", *CURVE_VIEWS}
        assert db.execute("SELECT count(*) FROM slice").fetchone() == (len(FRONTEND) + len(ENGINE) + 5 + 2,)
        assert db.execute('SELECT http_rid, "execution_time(ms)" FROM request_data ORDER BY 1').fetchall()[
            :2
        ] == [
            ("r1", 20.0),
            ("r2", 29.0),
        ]
        assert db.execute("SELECT rid, iter FROM batch_req WHERE batch_id = 2").fetchall() == [
            ("r1", 1),
            ("r2", 1),
        ]
        exec_2 = db.execute("SELECT event, pid, start FROM batch_exec WHERE batch_id = 2").fetchall()
        # in time order: the processes' marks are merged by start time, as the analyser merges them
        assert exec_2 == [("BatchSchedule", 200, T0_US + 11000), ("modelExec", 200, T0_US + 12000),
                          ("forward", 200, T0_US + 12500)]  # fmt: skip
        # the table has the analyser's column names, the view Insight reads the CSV's
        table = [row[1] for row in db.execute("PRAGMA table_info(request)")]
        view = [row[1] for row in db.execute("PRAGMA table_info(request_data)")]
        assert table[4:] == ["execution_time", "queue_wait_time", "first_token_latency", "cache_hit_rate",
                             "start_time(ms)"]  # fmt: skip
        assert view == header(out / "request.csv")
        assert db.execute("SELECT name, view_name FROM data_table").fetchall() == [
            (v, v) for v in ("request_data", "batch_info", "kvcache_usage", "forward_info")
        ]
        assert db.execute("SELECT * FROM data_link").fetchall() == [("rid", "request", "http_rid")]
        flows = db.execute("SELECT type FROM flow WHERE flow_id = 'r1' ORDER BY timestamp").fetchall()
        assert flows[0] == ("s",) and flows[-1] == ("f",) and len(flows) == 10
    finally:
        db.close()


CURVE_TABLES = {"req_latency", "first_token_latency", "prefill_gen_speed", "decode_gen_speed"}
CURVE_VIEWS = {
    "Request_Latency_curve", "First_Token_Latency_curve", "Prefill_Generate_Speed_Latency_curve",
    "Decode_Generate_Speed_Latency_curve", "Batch_Size_curve", "Batch_Token_curve",
    "Kvcache_Usage_Percent_curve", "Request_Status_curve",
}  # fmt: skip


def local(ms_after: float) -> str:
    """A curve table's time: the exporting machine's local time, as the analyser writes it there."""
    moment = datetime.datetime.fromtimestamp((T0_US + ms_after * 1000) / 1_000_000)
    return moment.strftime("%Y-%m-%d %H:%M:%S:%f")


def table(db: sqlite3.Connection, name: str) -> List[Tuple[Any, ...]]:
    return db.execute(f"SELECT * FROM {name}").fetchall()


def test_profiler_db_curves(exported):
    """The analyser's line charts (exporter_latency.py, exporter_req_status.py), worked out by hand:
    requests end r1 20 ms, r2 30, r5 45, r3 52, r4 60 after T0, having taken 20, 29, 5, 2 and 7 ms."""
    out, _ = exported
    db = sqlite3.connect(out / "profiler.db")
    try:
        # percentiles (numpy's linear) of the requests finished so far, rounded to 0.01; the median of all
        assert table(db, "req_latency") == [
            (local(20), 20000.0, 20000.0, 20000.0, 20000.0, 7000.0),
            (local(30), 24500.0, 28910.0, 28100.0, 24500.0, 7000.0),
            (local(45), 18000.0, 28820.0, 27200.0, 20000.0, 7000.0),
            (local(52), 14000.0, 28730.0, 26300.0, 12500.0, 7000.0),
            (local(60), 12600.0, 28640.0, 25400.0, 7000.0, 7000.0),
        ]
        assert table(db, "Request_Latency_curve")[1] == (
            local(30)[:19] + "." + local(30)[20:],
            24.5,
            28.91,
            28.1,
            24.5,
        )
        # first token: r1 0 -> 10 ms (its prefill's modelExec ends), r2 1 -> 10, in one 100 ms window (ms)
        (first,) = table(db, "first_token_latency")
        assert first[0] == local(0) and first[1:] == pytest.approx((9.5, 9.9, 9.99, 9.0, 9.5))
        # prefill: 2 requests over 5 ms from BatchSchedule's start to modelExec's end; decode: 2 over the
        # 5 ms between the ends of iterations 0 and 1, from iteration 1's start (12 ms)
        assert table(db, "prefill_gen_speed") == [(local(5), 400.0, 400.0, 400.0, 400.0, 400.0)]
        assert table(db, "decode_gen_speed") == [(local(12), 400.0, 400.0, 400.0, 400.0, 400.0)]
        assert table(db, "Batch_Size_curve") == [(0, 2.0, 2, 0), (1, 2.0, 0, 2)]
        # request_status as the analyser's table: a row per moment, RUNNING and PENDING never reported: 0
        assert table(db, "request_status") == [
            (when(ms), size, 0, 0) for ms, size in ((2, 1.0), (3, 2.0), (4, 1.0), (5, 0.0))
        ]
        assert table(db, "Request_Status_curve")[1] == (when(3)[:19] + "." + when(3)[20:], 2.0, 0.0, 0.0)
        captions = dict(db.execute("SELECT key, value_en FROM translate").fetchall())
        assert set(captions) == CURVE_VIEWS | {"request_data", "batch_info", "forward_info", "kvcache_usage"}
    finally:
        db.close()


def first_batch(*rids: Any) -> Dict[str, Any]:
    return {"rid": [{"rid": rid, "iter": 0} for rid in rids], "type": 2}


LINKED_SCHEDULER: List[Mark] = [  # nodeD-500: its own id 7 for the request chat-1; request 12 as a number
    ("httpReq", "Request", 0, 0, 51, {"rid": "chat-1", "recvTokenSize=": 5, "type": 0}),
    ("link", "Request", 0, 0, 51, {"type": 3, "from": "chat-1", "to": 7}),
    ("httpReq", "Request", 1, 0, 51, {"rid": 12.0, "recvTokenSize=": 3, "type": 0}),
    ("BatchSchedule", "Schedule", 2, 1, 52, first_batch(7, "012")),
    ("httpRes", "Request", 10, 0, 51, {"rid": "chat-1", "replyTokenSize=": 1, "type": 0}),
    ("httpRes", "Request", 11, 0, 51, {"rid": "12", "replyTokenSize=": 1, "type": 0}),
]  # fmt: skip
LINKED_WORKER: List[Mark] = [  # nodeD-501, its child: the model runs the batch under the scheduler's ids
    ("modelExec", "ModelExecute", 3, 3, 53, first_batch("007", 12)),
    ("forward", "ModelExecute", 3, 2, 53, first_batch(7.0, 12)),
]  # fmt: skip


def test_request_ids_are_formatted_and_linked_as_the_analyser_reads_them(tmp_path: Path):
    """A numeric id is its integer as text (12.0, "012" and 12 are request 12); a link renames the
    scheduler's id 7 to chat-1 in its marks and in those of its forward process (ppid), and is not drawn."""
    trace = tmp_path / "prof" / "1115-0613" / "Trace_Service"
    write_26(trace / "ms_service_nodeD-500.db", "nodeD", LINKED_SCHEDULER)
    write_26(trace / "ms_service_nodeD-501.db", "nodeD", LINKED_WORKER, meta=[("ppid", "500")])
    out = tmp_path / "out"
    result = export(tmp_path / "prof", out)
    assert result.returncode == 0, result.stderr
    requests = {r["http_rid"]: r for r in read_csv(out / "request.csv")}
    assert set(requests) == {"chat-1", "12"}
    # the first token: from httpReq to the end of the worker's modelExec of iteration 0 (6 ms, 5 after)
    assert requests["chat-1"]["first_token_latency(ms)"] == "6.0"
    assert requests["12"]["first_token_latency(ms)"] == "5.0"
    assert [r["res_list"] for r in read_csv(out / "batch.csv")] == [
        str([{"rid": "chat-1", "iter": 0}, {"rid": "12", "iter": 0}])
    ] * 2
    events = json.loads((out / "chrome_tracing.json").read_text())
    assert not [e for e in events if e["name"] == "link"]
    flow = [(e["ph"], e["pid"], e["tid"]) for e in events if e.get("id") == "chat-1" and e["ph"] in "stf"]
    assert flow == [("s", 500, "Request"), ("t", 500, "Schedule(52)"), ("t", 501, "ModelExecute(53)"),
                    ("t", 501, "ModelExecute(53)"), ("f", 500, "Request")]  # fmt: skip
    db = sqlite3.connect(out / "profiler.db")
    try:
        # one batch in two processes, joined by its res list: 2 requests from its schedule's start (2 ms)
        # to its execution's end (6 ms) in the other process
        assert [row[1:] for row in table(db, "prefill_gen_speed")] == [(500.0,) * 5]
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "kvcache" not in tables and "request_status" not in tables, "no empty table, as the analyser"
    finally:
        db.close()


def test_batch_types_are_corrected_by_the_nodes_prefill_or_decode_role(tmp_path: Path):
    """A decode node's prefill batches count as Decode only where they are a request's last such batch,
    else Other; a prefill node's decode batches are Other (plugin_trace.fix_batch_type)."""
    trace = tmp_path / "prof" / "1115-0613" / "Trace_Service"
    write_26(trace / "ms_service_nodeE-600.db", "nodeE", [
        ("decodeRes", "Request", 0, 0, 61, {"rid": "a", "type": 0}),
        ("BatchSchedule", "Schedule", 1, 0.5, 62, {"rid": [{"rid": "a", "iter": 0}], "type": 2}),
        ("BatchSchedule", "Schedule", 2, 0.5, 62, {"rid": [{"rid": "a", "iter": 0}], "type": 2}),
        ("BatchSchedule", "Schedule", 3, 0.5, 62, {"rid": [{"rid": "a", "iter": 1}], "type": 2}),
    ])  # fmt: skip
    write_26(trace / "ms_service_nodeE-700.db", "nodeE", [
        ("prefillRes", "Request", 0, 0, 71, {"rid": "b", "type": 0}),
        ("BatchSchedule", "Schedule", 1, 0.5, 72, {"rid": [{"rid": "b", "iter": 1}], "type": 2}),
        ("BatchSchedule", "Schedule", 2, 0.5, 72, {"rid": [{"rid": "b", "iter": 0}], "type": 2}),
    ])  # fmt: skip
    out = tmp_path / "out"
    result = export(tmp_path / "prof", out, "--format", "csv")
    assert result.returncode == 0, result.stderr
    types = [(r["prof_id"][-3:], r["batch_type"]) for r in read_csv(out / "batch.csv")]
    # in time order (ties in reading order); on the decode node a's last prefill batch is Decode
    assert types == [
        ("600", "Other"),
        ("700", "Other"),
        ("600", "Decode"),
        ("700", "Prefill"),
        ("600", "Decode"),
    ]


def test_summary_writes_what_msserviceprofiler_analyze_does(exported):
    """r1..r5 have both ends; only r1 and r2 ran in batches (their modelExec 4 + 3 ms, their iterations
    ending with their forward spans at 9.5 and 14.5 ms)."""
    out, _ = exported
    requests = {r["Metric"]: list(r.values())[1:] for r in read_csv(out / "request_summary.csv")}
    assert header(out / "request_summary.csv") == ["Metric", "Average", "Max", "Min", "P50", "P90", "P99"]
    assert requests == {
        "first_token_latency (ms)": ["9.5", "10.0", "9.0", "9.5", "9.9", "9.99"],  # request.csv's
        "subsequent_token_latency (ms)": ["5.0"] * 6,
        "total_time (ms)": ["12.6", "29.0", "2.0", "7.0", "25.4", "28.64"],  # httpReq to httpRes
        "exec_time (ms)": ["2.8", "7.0", "0.0", "0.0", "7.0", "7.0"],
        "waiting_time (ms)": ["2.0"] * 6,
        "input_token_num": ["7.6", "12.0", "4.0", "7.0", "10.8", "11.88"],
        "generated_token_num": ["2.4", "5.0", "1.0", "2.0", "4.2", "4.92"],
    }
    batches = {r["Metric"]: list(r.values())[1:] for r in read_csv(out / "batch_summary.csv")}
    assert batches == {"prefill_batch_num": ["2.0"] * 6, "decode_batch_num": ["2.0"] * 6}
    service = {r["Metric"]: r["Value"] for r in read_csv(out / "service_summary.csv")}
    assert service == {
        "total_input_token_num": "38.0",
        "total_generated_token_num": "12.0",
        "generate_token_speed (token/s)": "200.0",  # 12 tokens in the 60 ms from the first httpReq (r1)
        "generate_all_token_speed (token/s)": "833.3333",  # to the last httpRes (r4)
    }


@pytest.mark.parametrize(
    ("formats", "files"),
    [
        (["--format", "csv"], set(CSVS)),
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
    assert summary["processes"] == ["nodeA-100", "nodeA-200", "nodeB-300", "nodeC-400"]
    assert summary["layouts"] == {"mindie-26.0": 2, "mindie-8.3": 1, "msmonitor": 1}
    assert summary["rows"]["spans"] == 7 and summary["written"] == [str(out / n) for n in CSVS]


HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode=WAL")
db.execute("INSERT INTO slice (timestamp, name) VALUES (1, 'later')")
db.commit()
print("open", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def writer(prof_dir: Path) -> Iterator[Tuple[Path, subprocess.Popen]]:  # type: ignore[type-arg]
    """Another process with a recording open in WAL mode (as MindIE's writer and the plugin's are)."""
    path = prof_dir / "1115-0613" / "Trace_Service" / "ms_service_nodeA-100.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        read_line_until(proc, "open")
        yield path, proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_database_still_open_in_a_writer_is_refused(writer, prof_dir: Path, tmp_path: Path):
    path, _ = writer
    result = export(prof_dir, tmp_path / "out")
    assert result.returncode == 1
    assert f"{path}: still being written (a process has it open)" in result.stderr
    assert '"enable": 0' in result.stderr
    assert not (tmp_path / "out").exists()


def test_wal_and_shm_files_left_behind_are_read_not_refused(writer, prof_dir: Path, tmp_path: Path):
    path, proc = writer
    proc.kill()  # it dies with the database open: its -wal (holding a row) and -shm stay, unlocked
    proc.wait(timeout=30)
    assert path.with_name(path.name + "-wal").stat().st_size > 0
    result = export(prof_dir, tmp_path / "out", "--format", "json")
    assert result.returncode == 0, result.stderr
    events = json.loads((tmp_path / "out" / "chrome_tracing.json").read_text())
    assert any(e["name"] == "later" for e in events), "the row in the left-behind -wal is read"
    assert path.with_name(path.name + "-wal").stat().st_size > 0, "the inputs are not changed"


def test_a_recording_without_marks_says_why_and_fails(tmp_path: Path):
    write_26(tmp_path / "prof" / "d" / "Trace_Service" / "ms_service_h-1.db", "h", [])
    result = export(tmp_path / "prof", tmp_path / "out")
    assert result.returncode == 1
    assert "nothing recorded in" in result.stderr and "the tables are empty" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_database_of_another_kind_is_named(tmp_path: Path):
    path = tmp_path / "prof" / "ms_service_h-1.db"
    path.parent.mkdir()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE other (x)")
    result = export(tmp_path / "prof", tmp_path / "out")
    assert (
        result.returncode == 1
        and f"{path}: not a service profiler recording (tables: other;" in result.stderr
    )


def test_a_file_name_whose_pid_is_not_ascii_digits_is_read_as_a_name_without_a_pid(tmp_path: Path):
    """'²³' passes isdigit() and int() refuses it: the export ended in a traceback."""
    trace = tmp_path / "prof" / "d" / "Trace_Service"
    write_26(trace / "ms_service_host-23.db", "host", ENGINE, meta=[("dpRankId", "0")])
    hostile = (trace / "ms_service_host-23.db").rename(trace / "ms_service_host-²³.db")
    result = export(tmp_path / "prof", tmp_path / "out")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert f"read 5 events, 6 spans, 0 counters (mindie-26.0) from {hostile}\n" in result.stderr
    json.loads((tmp_path / "out" / "chrome_tracing.json").read_text())


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
