"""What every benchmark shares: the figures' table and JSON, percentiles, and the real processes.

A benchmark builds :class:`Figure` rows — the measured value, the issue's goal, and the C++ dynolog
reference beside it — and calls :func:`report`, which prints the table and writes
``benchmarks/results/<name>.json``. Real daemons and workloads come from ``tests/harness.py``, the same
helpers the integration tests use, so there is one way to start and stop them.

Files whose name starts with ``_`` are helpers, not benchmarks: ``run.py`` skips them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"

# The process helpers live with the tests; benchmarks reuse them rather than keep a second copy.
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))

from harness import Daemon, Workload, cpu_seconds, free_port, stop_process, wait_until  # noqa: E402

__all__ = [
    "BENCH_DIR",
    "REPO",
    "RESULTS_DIR",
    "Daemon",
    "Figure",
    "Workload",
    "clean_env",
    "cpu_seconds",
    "free_port",
    "percentile",
    "report",
    "running_daemon",
    "stop_process",
    "summarize_ns",
    "table",
    "wait_until",
]


@dataclass
class Figure:
    """One measured figure, with the goal it is held to (if any) and the C++ dynolog figure beside it.

    ``goal`` is ``"<= 0.5"`` or ``">= 10000"`` (same unit as ``value``), or ``""`` when the figure is
    only reported. ``status`` is filled in by :func:`report`: ``met``, ``MISSED`` or ``reported``.
    """

    figure: str
    value: float
    unit: str
    goal: str = ""
    reference: str = ""
    status: str = ""

    def judge(self) -> str:
        if not self.goal:
            return "reported"
        op, _, bound = self.goal.partition(" ")
        limit = float(bound)
        ok = self.value <= limit if op == "<=" else self.value >= limit
        return "met" if ok else "MISSED"


def percentile(values: Sequence[float], q: float) -> float:
    """The *q*-th percentile (0..100) of *values*, nearest-rank on the sorted data."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def summarize_ns(samples_ns: Sequence[int]) -> Dict[str, float]:
    """Median, p99 and max of nanosecond samples, in nanoseconds."""
    ordered = sorted(samples_ns)
    return {
        "count": len(ordered),
        "p50": percentile(ordered, 50),
        "p99": percentile(ordered, 99),
        "max": float(ordered[-1]) if ordered else math.nan,
    }


@contextlib.contextmanager
def running_daemon(*args: str, open_files: Optional[int] = None) -> Iterator[Daemon]:
    """A real ``dynolog`` on a free port with private pathname sockets; stopped and removed on exit.

    Its per-client rate limits are off (calls, and new TLS connections): a benchmark is one client
    calling as fast as it can, and measures the daemon, not the limit (``benchmarks/tls.py`` would be
    refused after the burst)."""
    with tempfile.TemporaryDirectory(prefix="msmonitor-bench-") as tmp:
        daemon = Daemon(
            Path(tmp), ("--client-rate-limit", "0", "--tls-handshake-rate", "0", *args), open_files=open_files
        )
        try:
            yield daemon.start()
        finally:
            daemon.cleanup()  # stops it and removes its socket directory


def cpu_schedstat_s(pid: int) -> float:
    """Seconds on CPU of process *pid*, summed over its threads (``/proc/<pid>/task/*/schedstat``, ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def proc_status(pid: int, keys: Sequence[str] = ("VmRSS", "VmHWM", "Threads")) -> Dict[str, int]:
    """Numeric fields of ``/proc/<pid>/status`` (memory in KiB)."""
    values: Dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in keys:
            values[key] = int(rest.split()[0])
    return values


def clean_env(**extra: str) -> Dict[str, str]:
    """This environment without the plugin's and Kineto's variables, plus *extra*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSMONITOR_", "KINETO_"))}
    env.update(extra)
    return env


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def table(figures: Sequence[Figure]) -> str:
    header = ("figure", "measured", "goal", "status", "C++ dynolog")
    rows = [
        (
            f.figure,
            f"{_fmt(f.value)} {f.unit}",
            f"{f.goal} {f.unit}" if f.goal else "—",
            f.status,
            f.reference,
        )
        for f in figures
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def machine() -> Dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        # Other work on the machine skews every figure; the load when the benchmark finished says how much.
        "loadavg_1m": os.getloadavg()[0],
    }


def report(
    name: str, figures: List[Figure], notes: Sequence[str] = (), details: Optional[Dict[str, Any]] = None
) -> Path:
    """Print the table and notes, and write ``results/<name>.json``; returns its path."""
    for f in figures:
        f.status = f.judge()
    print(f"\n== {name} ==")
    print(table(figures))
    for note in notes:
        print(f"  * {note}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    document = {
        "name": name,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        "figures": [asdict(f) for f in figures],
        "notes": list(notes),
        "details": details or {},
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"  -> {path.relative_to(REPO)}")
    return path
