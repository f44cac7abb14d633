"""The plugin's cost inside a user process: ``step()`` with nothing pending, and the ``.pth`` start hook.

``step()``: batches of 1000 calls (ten calls unrolled per loop turn, so the loop adds a tenth of its
cost to each call) timed with ``perf_counter_ns`` with the garbage collector off, as ``timeit`` does;
the figure is the median and p99 over the batches of the per-call time, loop included.

The ``.pth`` hook: every interpreter start in an environment with the plugin installed runs one line of
``msmonitor_plugin.pth``; with ``MSMONITOR_USE_DAEMON`` unset it reads one variable and imports nothing.
Two measurements:

* exact — the hook's own cost: ``exec`` of that line (compile + run, as ``site.addpackage`` does it), timed
  in-process over many repetitions;
* end to end — ``python -c pass`` in a throwaway virtual environment, alternately with and without the
  file in its site-packages. Interpreter start varies by far more than the hook costs on a shared machine,
  so this shows the hook is lost in the noise; the exact figure is the one to read.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import msmonitor_plugin
from _bench import REPO, Figure, clean_env, percentile, report

PTH_SOURCE = REPO / "plugin" / "msmonitor_plugin.pth"
CALLS_PER_BATCH = 1000


def time_calls(fn: Callable[[], None], batches: int, budget_s: float) -> List[float]:
    """Per-call nanoseconds of *fn*, one sample per batch of 1000 calls; bounded by *budget_s*."""
    per_call: List[float] = []
    turns = range(CALLS_PER_BATCH // 10)
    clock = time.perf_counter_ns
    deadline = time.monotonic() + budget_s
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(batches):
            t0 = clock()
            for _ in turns:
                fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn()  # noqa: E702  # fmt: skip
            per_call.append((clock() - t0) / CALLS_PER_BATCH)
            if time.monotonic() > deadline:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return per_call


def _noop() -> None:
    pass


def bench_step(batches: int) -> Dict[str, float]:
    if msmonitor_plugin.is_active():
        raise SystemExit("the plugin is active in this process (MSMONITOR_USE_DAEMON set?); unset it")
    step = msmonitor_plugin.step
    time_calls(step, 200, 2.0)  # warm-up: caches, branch predictors, CPU frequency
    samples = time_calls(step, batches, 10.0)
    baseline = time_calls(_noop, batches, 5.0)
    return {
        "batches": len(samples),
        "p50_ns": statistics.median(samples),
        "p99_ns": percentile(samples, 99),
        "noop_p50_ns": statistics.median(baseline),
    }


def bench_pth_exec(repetitions: int) -> Dict[str, float]:
    """The hook line as site.py runs it: ``exec(line)`` of the text, compile included."""
    line = PTH_SOURCE.read_text().splitlines()[0]
    env_had = os.environ.pop("MSMONITOR_USE_DAEMON", None)
    try:
        samples: List[float] = []
        scope: Dict[str, object] = {}
        for _ in range(20):
            t0 = time.perf_counter_ns()
            for _ in range(repetitions // 20):
                exec(line, scope)
            samples.append((time.perf_counter_ns() - t0) / (repetitions // 20))
    finally:
        if env_had is not None:
            os.environ["MSMONITOR_USE_DAEMON"] = env_had
    return {"p50_ns": statistics.median(samples), "min_ns": min(samples)}


def bench_interpreter_start(runs: int, budget_s: float) -> Dict[str, float]:
    """``python -c pass`` in a fresh venv, alternating with and without the .pth in site-packages."""
    env = clean_env()
    with tempfile.TemporaryDirectory(prefix="msmonitor-bench-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
        python = venv / "bin" / "python"
        site_packages = Path(
            subprocess.run(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                check=True,
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        )
        pth = site_packages / PTH_SOURCE.name
        times: Dict[bool, List[float]] = {False: [], True: []}
        deadline = time.monotonic() + budget_s
        for i in range(2 * runs):
            with_hook = i % 2 == 1
            if with_hook:
                pth.write_text(PTH_SOURCE.read_text())
            elif pth.exists():
                pth.unlink()
            t0 = time.perf_counter_ns()
            subprocess.run([str(python), "-c", "pass"], check=True, env=env, timeout=30)
            times[with_hook].append(time.perf_counter_ns() - t0)
            if time.monotonic() > deadline and i % 2 == 1:
                break
    without, with_ = times[False], times[True]
    return {
        "runs_each": len(with_),
        "without_p50_ns": statistics.median(without),
        "with_p50_ns": statistics.median(with_),
        "delta_p50_ns": statistics.median(with_) - statistics.median(without),
        "without_stdev_ns": statistics.stdev(without) if len(without) > 1 else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=5000, help="batches of 1000 step() calls")
    parser.add_argument("--starts", type=int, default=60, help="interpreter starts with and without the hook")
    args = parser.parse_args()

    step = bench_step(args.batches)
    pth = bench_pth_exec(20_000)
    start = bench_interpreter_start(args.starts, budget_s=30.0)

    figures = [
        Figure("step(), nothing pending: median", step["p50_ns"], "ns", "<= 500", "— (no step API)"),
        Figure("step(), nothing pending: p99 of batches", step["p99_ns"], "ns", "", "—"),
        Figure("  (a no-op Python call, same loop)", step["noop_p50_ns"], "ns", "", "—"),
        Figure(".pth hook, variable unset: exec of its line", pth["p50_ns"] / 1000, "µs", "", "— (no hook)"),
        Figure("python -c pass, without the .pth: median", start["without_p50_ns"] / 1e6, "ms", "", "—"),
        Figure("python -c pass, with the .pth: median", start["with_p50_ns"] / 1e6, "ms", "", "—"),
        Figure("  difference of medians", start["delta_p50_ns"] / 1e6, "ms", "", "—"),
    ]
    notes = [
        f"step(): {step['batches']} batches of {CALLS_PER_BATCH} calls, loop overhead included "
        "(ten calls unrolled per loop turn), gc off.",
        "The .pth hook's exact cost is the exec row (compile + run of its one line, as site.py does it, "
        "with MSMONITOR_USE_DAEMON unset: it imports nothing).",
        f"Interpreter start: {start['runs_each']} alternating runs each way in a throwaway venv; run-to-run "
        f"stdev {start['without_stdev_ns'] / 1e6:.2f} ms dwarfs the hook, so the difference is noise.",
    ]
    report("step", figures, notes, {"step": step, "pth_exec": pth, "interpreter_start": start})
    return 0


if __name__ == "__main__":
    sys.exit(main())
