"""Against MindIE's own analyser, where one is at hand (opt-in: its source is not ours to ship): a recording
made by this plugin's API, as a MindIE service's markers make it, parsed by ``python -m
ms_service_profiler.parse`` (and ``msserviceprofiler analyze``, for the summaries, where msguard is
installed) and exported by ``dyno service export --summary``, file by file.

    MINDIE_ANALYSER_SOURCE=<msserviceprofiler checkout> MINDIE_ANALYSER_PYTHON=<python with pandas, scipy,
    psutil, pydantic[, msguard]> .venv/bin/python -m pytest -q tests/test_service_analyser.py

Every CSV column is compared, datetimes included (the analyser's float arithmetic is reproduced), the
names of profiler.db's tables' and views' columns, every row of its line charts' tables and views, the
trace's processes and its events per track and phase; the summaries' figures to 1 in their last place. A
missing value is written as pandas writes it: empty with pandas 3, ``<NA>`` or ``None`` with pandas 2
(read here as empty). Under pandas 3 that analyser fails to write forward.csv and its table
(``'prof_id'``): they are compared where they are written."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Counter, Dict, List

import pytest

import peers
from harness import dyno
from msmonitor_contract import service_tables

SOURCE, PYTHON = peers.MINDIE_ANALYSER_SOURCE, peers.MINDIE_ANALYSER_PYTHON


@pytest.fixture(autouse=True, scope="module")
def analyser() -> Path:
    return peers.need(peers.MINDIE_ANALYSER_PEER)


RECORD = """
import sys
from msmonitor_plugin.service_profiler import api
from msmonitor_plugin.service_profiler.store import ServiceStore
from ms_service_profiler import Level, Profiler
from ms_service_profiler.profiler import prof_step

store = ServiceStore(sys.argv[1])
api.attach(api.Recording(Level.INFO, None, store, lambda: None))
rids = [f"req-{i}" for i in range(4)]
for i, rid in enumerate(rids):
    Profiler(Level.INFO).domain("Request").res(rid).metric("recvTokenSize", 16 + i).event("httpReq")
    Profiler(Level.INFO).domain("Schedule").res(rid).metric_scope("QueueName", "WAITING").metric(
        "QueueSize", i + 1).event("Enqueue")
    Profiler(Level.INFO).domain("Schedule").res(rid).metric_scope("QueueName", "RUNNING").metric(
        "QueueSize", i).event("Dequeue")
for step in range(3):
    batch = [{"rid": rid, "iter": step} for rid in rids]
    with Profiler(Level.INFO).domain("Schedule").res(batch).span_start("BatchSchedule"):
        Profiler(Level.INFO).domain("KVCache").res(rids).metric("deviceBlock", 100 - step).event("Allocate")
    with Profiler(Level.INFO).domain("ModelExecute").res(batch).span_start("modelExec"):
        with Profiler(Level.INFO).domain("ModelExecute").res(batch).span_start("forward"):
            sum(range(20000))
    prof_step()
Profiler(Level.INFO).domain("KVCache").res(rids).metric("deviceBlock", 100).event("Free")
for rid in rids:
    Profiler(Level.INFO).domain("Request").res(rid).metric("replyTokenSize", 3).event("httpRes")
api.attach(None)
store.close()
"""


MISSING = ("<NA>", "None")  # pandas 2's missing values; pandas 3 writes them empty


def read(path: Path) -> List[Dict[str, str]]:
    with path.open(newline="") as f:
        return [{k: "" if v in MISSING else v for k, v in row.items()} for row in csv.DictReader(f)]


PARSE = (PYTHON, "-m", "ms_service_profiler.parse")
DYNO_EXPORT = dyno.command("service", "export")


def run(*command: str) -> None:
    done = subprocess.run(command, env={**os.environ, "PYTHONPATH": SOURCE}, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


def as_mindie_83(recording: Path, prof: Path) -> None:
    """The recording as MindIE 8.3 wrote it: Mstx rows (name and domain in the message), Meta(name, value),
    no Trace_Service folder."""
    copy = prof / "1115-0613" / recording.name
    copy.parent.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(recording)) as src, contextlib.closing(
        sqlite3.connect(copy)
    ) as dst:
        dst.execute(service_tables.MSTX.create())
        dst.execute(service_tables.META_83.create())
        dst.executemany(service_tables.META_83.insert(), src.execute("SELECT name, value FROM Meta"))
        marks = src.execute(
            "SELECT id, timestamp, duration, name, cat, args, pid, tid FROM slice ORDER BY id"
        )
        for mark_id, ts, duration, name, domain, args, pid, tid in marks.fetchall():
            message = {"domain": domain, "name": name, **json.loads(args)}
            flag = service_tables.SPAN_FLAG if message["type"] == 2 else 1
            dst.execute(
                service_tables.MSTX.insert(),
                (json.dumps(message), flag, mark_id, ts, ts + duration, pid, tid),
            )
        dst.commit()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    root = tmp_path_factory.mktemp("analyser")
    prof, prof_83 = root / "prof", root / "prof-8.3"
    record = subprocess.run(
        [sys.executable, "-c", RECORD, str(prof / "1115-0613" / "Trace_Service")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert record.returncode == 0, record.stderr
    as_mindie_83(next(prof.rglob("ms_service_*.db")), prof_83)
    for source, theirs, ours in ((prof, "theirs", "ours"), (prof_83, "theirs-8.3", "ours-8.3")):
        run(*PARSE, "--input-path", str(source), "--output-path", str(root / theirs))
        run(*DYNO_EXPORT, "--input-path", str(source), "--output-path", str(root / ours), "--summary")
    with contextlib.suppress(AssertionError):  # analyze needs msguard: its tests skip without it
        run(*ANALYZE, "--input-path", str(prof), "--output-path", str(root / "analyze"), "--format", "csv")
    return {name: root / name for name in ("theirs", "ours", "theirs-8.3", "ours-8.3", "analyze")}


# `msserviceprofiler analyze` (its summaries), called as its command line does; it needs msguard.
ANALYZE_SCRIPT = """
import argparse, sys
from ms_service_profiler import analyze
parser = argparse.ArgumentParser()
analyze.arg_parse(parser.add_subparsers())
args = parser.parse_args(["analyze", *sys.argv[1:]])
args.func(args=args)
"""
ANALYZE = (PYTHON, "-c", ANALYZE_SCRIPT)


@pytest.mark.parametrize("name", ["request_summary.csv", "batch_summary.csv", "service_summary.csv"])
def test_the_same_summaries_as_msserviceprofiler_analyze(outputs: Dict[str, Path], name: str):
    if not (outputs["analyze"] / name).exists():
        pytest.skip("analyze did not run here (it needs msguard)")
    ours, theirs = read(outputs["ours"] / name), read(outputs["analyze"] / name)
    assert [row["Metric"] for row in ours] == [row["Metric"] for row in theirs]
    for mine, its in zip(ours, theirs):
        figures = [(float(mine[k]), float(its[k])) for k in mine if k != "Metric"]
        # Times are float microseconds in steps of 0.25, so a figure rounded to 0.0001 ms often sits on
        # a tie, which numpy's summation order and rounding break one way or the other: 1 in the last place.
        assert all(abs(a - b) <= 1.5e-4 for a, b in figures), (mine, its)


@pytest.mark.parametrize("layout", ["", "-8.3"])
@pytest.mark.parametrize(
    "name", ["request.csv", "batch.csv", "forward.csv", "kvcache.csv", "request_status.csv"]
)
def test_the_same_rows_as_mindies_analyser(outputs: Dict[str, Path], name: str, layout: str):
    """The recording as the plugin writes it (MindIE 26.0's slice), and as MindIE 8.3 wrote it (Mstx)."""
    if name == "forward.csv" and not (outputs["theirs" + layout] / name).exists():
        pytest.skip("this analyser did not write forward.csv (it fails to under pandas 3)")
    theirs, ours = read(outputs["theirs" + layout] / name), read(outputs["ours" + layout] / name)
    assert list(theirs[0]) == list(ours[0]), "the same columns, in order"
    assert ours == theirs


DB_TABLES = [
    "request",
    "batch",
    "batch_req",
    "batch_exec",
    "forward",
    "kvcache",
    "slice",
    "thread",
    "data_table",
    "translate",
]
CURVE_TABLES = [
    "req_latency",
    "first_token_latency",
    "prefill_gen_speed",
    "decode_gen_speed",
    "request_status",
]
CURVE_VIEWS = [
    "Request_Latency_curve",
    "First_Token_Latency_curve",
    "Prefill_Generate_Speed_Latency_curve",
    "Decode_Generate_Speed_Latency_curve",
    "Batch_Size_curve",
    "Batch_Token_curve",
    "Kvcache_Usage_Percent_curve",
]
DB_VIEWS = ["request_data", "batch_info", "forward_info", "kvcache_usage", *CURVE_VIEWS]


def columns(db: Path, table: str) -> List[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


@pytest.mark.parametrize("table", DB_TABLES + CURVE_TABLES + DB_VIEWS)
def test_profiler_db_has_the_analysers_tables_and_views(outputs: Dict[str, Path], table: str):
    theirs, ours = (columns(outputs[side] / "profiler.db", table) for side in ("theirs", "ours"))
    if not theirs and table.startswith("forward"):
        pytest.skip("this analyser did not write forward (it fails to under pandas 3)")
    assert theirs and set(theirs) <= set(ours), f"{table}: {theirs} against {ours}"


def rows(db: Path, table: str) -> List[tuple]:  # type: ignore[type-arg]
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(f"SELECT * FROM {table}").fetchall()


@pytest.mark.parametrize("layout", ["", "-8.3"])
@pytest.mark.parametrize("table", CURVE_TABLES + CURVE_VIEWS)
def test_profiler_db_curves_have_the_analysers_rows(outputs: Dict[str, Path], table: str, layout: str):
    """Figures and times alike (the curve tables' local times: both run here). Its Request_Status_curve
    cannot be read (it reads columns its table lacks), so ours is not compared."""
    theirs, ours = (rows(outputs[side + layout] / "profiler.db", table) for side in ("theirs", "ours"))
    assert theirs and ours == theirs


def trace(path: Path) -> List[Dict[str, Any]]:
    return json.loads((path / "chrome_tracing.json").read_text())


@pytest.mark.parametrize("layout", ["", "-8.3"])
def test_the_same_trace_processes_tracks_and_events(outputs: Dict[str, Path], layout: str):
    """Processes named and labelled alike, and on each track the same number of events of each phase."""
    theirs, ours = (trace(outputs[side + layout]) for side in ("theirs", "ours"))

    def processes(events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        return [e for e in events if e["ph"] == "M" and e["name"].startswith("process_")]

    def per_track(events: List[Dict[str, Any]]) -> Counter:  # type: ignore[type-arg]
        return Counter((e["ph"], e["pid"], e.get("tid")) for e in events if e["ph"] != "M")

    assert processes(ours) == processes(theirs)
    assert per_track(ours) == per_track(theirs)
