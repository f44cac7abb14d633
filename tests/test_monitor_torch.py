"""The torch backend against real torch: a CPU training loop in a child process monitors itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import List, Tuple

import pytest

from harness import REPO, WORKLOADS
from msmonitor_plugin.monitor import Kind, Report

pytestmark = pytest.mark.torch


def run_loop(*keys: str, timeout: float = 120) -> Tuple[str, List[Report], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSMONITOR_", "FAKE_MSPTI_"))}
    env["PYTHONPATH"] = str(REPO / "plugin")
    proc = subprocess.run(
        [sys.executable, str(WORKLOADS / "monitor_loop.py"), *keys],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    reports = [
        Report.from_dict(json.loads(line[len("report ") :])) for line in lines if line.startswith("report ")
    ]
    started = next(line for line in lines if line.startswith("started "))
    return started, reports, lines[-1]


def test_cpu_training_loop_reports_operators_markers_and_stops_by_duration() -> None:
    started, reports, last = run_loop(
        "NPU_MONITOR_START=true",
        "NPU_MONITOR_STOP=false",
        "REPORT_INTERVAL_S=1",
        "DURATION=3.5",
        "MSPTI_ACTIVITY_KIND=Kernel,API,Marker,Communication,Hccl",
        "NPU_MONITOR_LOG_FILE=",
        "NPU_MONITOR_EXPORT_TYPE=DB",
    )
    assert started.startswith("started backend=torch")
    assert json.loads(started.split("unavailable=", 1)[1]).keys() == {"Hccl"}
    assert last == "stopped duration"
    assert len(reports) >= 3 and reports[-1].final
    assert [r.seq for r in reports] == list(range(1, len(reports) + 1))
    sampled = [r for r in reports if r.kinds]
    assert len(sampled) >= 3  # one profiling window per interval
    for report in sampled:
        assert report.backend == "torch"
        assert 0 < report.sampled_ns < report.end_ns - report.start_ns
        assert {k.kind for k in report.kinds} == {Kind.KERNEL, Kind.API, Kind.MARKER}
        assert all(k.device == -1 for k in report.kinds)
        kernels = [n.name for n in report.find(Kind.KERNEL)[0].top]
        # The GEMMs are among the operators that take the time (their rank among them varies with load).
        assert {"aten::addmm", "aten::mm"} & set(kernels), kernels
        api = [n.name for n in report.find(Kind.API)[0].top]
        assert "aten::linear" in api
        markers = {n.name for n in report.find(Kind.MARKER)[0].top}
        assert "train_step" in markers
        assert report.unavailable == {
            "Hccl": "not observable through torch.profiler on a machine without CUDA"
        }


def test_the_plugin_never_imports_torch_itself() -> None:
    code = (
        "import sys; from msmonitor_plugin.monitor import backends, engine, torch_backend;"
        "backend, notes = backends.select_backend({}); print(backend.name, 'torch' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSMONITOR_")}
    env["PYTHONPATH"] = str(REPO / "plugin")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["none", "False"], out.stderr
