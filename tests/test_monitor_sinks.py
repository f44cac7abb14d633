"""The daemon's sinks, fed by the whole plugin-side path: fake libmspti.so → ctypes binding → aggregation
→ Report → chunks → ChunkAssembler → sink; each read back with its consumer's own library."""

from __future__ import annotations

import ctypes
import json
import os
import threading
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from dynolog.core.drops import Drops
from dynolog.monitoring.sinks import ProcessLabels, Sinks, SinkWorker
from dynolog.monitoring.sinks.jsonl import JsonlSink, beside
from dynolog.monitoring.sinks.prometheus import PrometheusSink
from dynolog.monitoring.sinks.tensorboard import TensorBoardSink
from fake_mspti import fake_mspti_build
from harness import wait_until
from msmonitor_contract.activity import HOST
from msmonitor_plugin.monitor import ChunkAssembler, Kind, Monitor, MonitorConfig, Report

PROCESS = ProcessLabels(host="node1", job="77", rank=3, pid=4242)


@pytest.fixture(scope="session")
def fake_mspti(tmp_path_factory: pytest.TempPathFactory) -> str:
    try:
        return fake_mspti_build.build(str(tmp_path_factory.mktemp("fake-mspti")))
    except fake_mspti_build.NoCompiler as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def reports(fake_mspti: str) -> List[Report]:
    """Two reports of a real Monitor on the fake MSPTI, carried through 4 KiB chunks."""
    env = {
        "MSMONITOR_MSPTI_LIB": fake_mspti,
        **fake_mspti_build.settings(count=4 * 3000, names=30, devices=2, null_every=100, start_kinds=4),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        monitor = Monitor(rank=3)
        monitor.apply(
            MonitorConfig.parse(
                {
                    "NPU_MONITOR_START": "true",
                    "NPU_MONITOR_STOP": "false",
                    "REPORT_INTERVAL_S": "1",
                    "DURATION": "0",
                    "MSPTI_ACTIVITY_KIND": "Kernel,API,Marker,Communication",
                    "NPU_MONITOR_LOG_FILE": "",
                    "NPU_MONITOR_EXPORT_TYPE": "DB",
                    "TOP_N": "5",
                }
            )
        )
        control = ctypes.CDLL(fake_mspti)
        # The fake library's flag has no event to wait on: polled every 10 ms, so that the monitor stops
        # as soon as the records are all out.
        wait_until(control.fakeMsptiDone, 20, "the fake libmspti to produce its records", pause=0.01)
        first = monitor.stop()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert first is not None
    later = {"end_ns": first.end_ns + 10**9, "sampled_ns": first.sampled_ns + 10**9}  # MSPTI: all of it
    second = Report.from_dict(dict(first.to_dict(), seq=first.seq + 1, **later))
    assembler = ChunkAssembler()
    out = []
    for report in (first, second):
        done = [r for r in (assembler.add(c) for c in report.to_chunks(4096)) if r is not None]
        assert done == [report]
        out.extend(done)
    return out


def test_the_report_carries_what_the_fake_produced(reports: List[Report]) -> None:
    report = reports[0]
    assert {k.kind for k in report.kinds} == {Kind.KERNEL, Kind.API, Kind.MARKER, Kind.COMMUNICATION}
    assert sum(k.count for k in report.find(Kind.KERNEL)) == 3000
    assert {k.device for k in report.find(Kind.KERNEL)} == {0, 1}
    assert report.find(Kind.API)[0].device == HOST
    assert all(len(k.top) <= 5 for k in report.kinds)
    assert report.counters["unnamed"] == 4 * 30 - 30  # every 100th event of the 3 named non-marker kinds


def test_tensorboard_runs_and_tags_read_back_with_tensorboard(tmp_path: Path, reports: List[Report]) -> None:
    sink = TensorBoardSink(tmp_path, top_n=3)
    for report in reports:
        sink.emit(PROCESS, report)
    sink.close()
    runs = sorted(str(p.parent.relative_to(tmp_path)) for p in tmp_path.rglob("events.out.tfevents.*"))
    assert runs == ["device_0", "device_1", "device_host/rank_3"]
    device0 = EventAccumulator(str(tmp_path / "device_0"))
    device0.Reload()
    tags = device0.Tags()["scalars"]
    assert {
        "Kernel/total_ns",
        "Kernel/count",
        "Kernel/mean_ns",
        "Kernel/max_ns",
        "Communication/total_ns",
    } <= set(tags)
    kernel0 = reports[0].find(Kind.KERNEL, 0)[0]
    counts = device0.Scalars("Kernel/count")
    assert [(e.step, e.value) for e in counts] == [(r.seq, kernel0.count) for r in reports]
    top = kernel0.top[0]
    assert device0.Scalars(f"Kernel/top/{top.name}/total_ns")[0].value == top.total_ns
    assert len([t for t in tags if t.startswith("Kernel/top/") and t.endswith("/total_ns")]) == 3
    host = EventAccumulator(str(tmp_path / "device_host" / "rank_3"))
    host.Reload()
    host_tags = set(host.Tags()["scalars"])
    assert {"API/total_ns", "Marker/total_ns"} <= host_tags
    assert any(t.startswith("Marker/top/fake_domain/Marker_") for t in host_tags)
    assert "sampled_fraction" not in host_tags, "MSPTI observes the whole interval: nothing to say"


def scrape(port: int) -> Dict[str, List]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


@pytest.fixture
def prometheus() -> Iterator[PrometheusSink]:
    sink = PrometheusSink("127.0.0.1", 0, top_n=2)
    yield sink
    sink.close()


def test_prometheus_page_parses_with_prometheus_client(
    prometheus: PrometheusSink, reports: List[Report]
) -> None:
    for report in reports:
        prometheus.emit(PROCESS, report)
    other = ProcessLabels(host="node1", job="77", rank=-1, pid=99)
    prometheus.emit(other, reports[0])
    families = scrape(prometheus.port)
    records = {
        (s.labels["rank"], s.labels["device"], s.labels["kind"]): s.value
        for s in families["msmonitor_records"]
    }
    kernel0 = reports[0].find(Kind.KERNEL, 0)[0]
    assert records[("3", "0", "Kernel")] == 2 * kernel0.count  # a counter: both reports
    assert records[("pid99", "0", "Kernel")] == kernel0.count
    sample = families["msmonitor_interval_records"][0]
    assert set(sample.labels) == {"host", "job", "rank", "device", "kind"}
    assert (sample.labels["host"], sample.labels["job"]) == ("node1", "77")
    top = [s for s in families["msmonitor_top_duration_seconds"] if s.labels["rank"] == "3"]
    per_group: Dict[tuple, int] = {}
    for s in top:
        key = (s.labels["device"], s.labels["kind"])
        per_group[key] = per_group.get(key, 0) + 1
    assert max(per_group.values()) == 2  # names limited to the top N
    assert any(s.labels["name"].startswith("fake_domain/Marker_") for s in top)
    assert {s.value for s in families["msmonitor_interval_sampled_ratio"]} == {1.0}, "MSPTI sees it all"
    prometheus.forget(other)
    assert not any(s.labels["rank"] == "pid99" for s in scrape(prometheus.port)["msmonitor_records"])
    # The daemon's own drops, by where, read when scraped.
    prometheus.daemon_drops = lambda: {"sink_queue": 3, "watch_queue": 0}
    dropped = {s.labels["where"]: s.value for s in scrape(prometheus.port)["dynolog_dropped"]}
    assert dropped == {"sink_queue": 3.0, "watch_queue": 0.0}


def test_jsonl_beside_the_daemon_log_rotates(tmp_path: Path, reports: List[Report]) -> None:
    path = beside(tmp_path / "dynolog.log")
    sink = JsonlSink(path, max_bytes=20_000, backups=2)
    for _ in range(10):
        for report in reports:
            sink.emit(PROCESS, report)
    sink.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["dynolog_metrics.jsonl", "dynolog_metrics.jsonl.1", "dynolog_metrics.jsonl.2"]
    line = json.loads(path.read_text().splitlines()[-1])
    assert (line["host"], line["job"], line["rank"], line["pid"]) == ("node1", "77", 3, 4242)
    assert Report.from_dict(line["report"]) == reports[-1]


class Broken:
    def emit(self, process: ProcessLabels, report: Report) -> None:
        raise OSError("disk full")

    def close(self) -> None:
        pass


def test_one_failing_sink_does_not_stop_the_others(tmp_path: Path, reports: List[Report]) -> None:
    jsonl = JsonlSink(tmp_path / "m.jsonl")
    sinks = Sinks([Broken(), jsonl])
    sinks.emit(PROCESS, reports[0])
    sinks.forget(PROCESS)
    sinks.close()
    assert sinks.errors == {"Broken": 1}
    assert len((tmp_path / "m.jsonl").read_text().splitlines()) == 1


def test_reports_the_sinks_cannot_take_are_dropped_and_counted_where():
    """The sinks' thread is stuck in a slow sink: the queue keeps the newest, the rest are counted."""
    entered, release = threading.Event(), threading.Event()

    class Stuck:
        def emit(self, process: ProcessLabels, report: Report) -> None:
            entered.set()
            release.wait(10)

        def close(self) -> None:
            pass

    drops = Drops()
    worker = SinkWorker(Sinks([Stuck()]), drops, capacity=2)
    labels = ProcessLabels("h", "1", 0, 7)
    report = Report(0, 7, "torch", 0, 1, 1)
    worker.emit(labels, report)
    assert entered.wait(10)
    for _ in range(4):
        worker.emit(labels, report)
    assert drops.snapshot() == {"sink_queue": 2}
    release.set()
    worker.close()
