"""Run every benchmark in this folder, one after the other, and print one combined summary.

A benchmark is any ``benchmarks/*.py`` other than this file and helpers whose name starts with ``_``;
it prints its own table and writes ``results/<name>.json`` (see ``_bench.report``). New scripts are
picked up without touching this file. Figures are not asserted: a missed goal is shown, not a failure.
The exit status is non-zero only when a benchmark itself failed (crashed, timed out, wrote no result).

    .venv/bin/python benchmarks/run.py            # all of them (make bench)
    .venv/bin/python benchmarks/run.py ipc step   # only these
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from _bench import BENCH_DIR, RESULTS_DIR, Figure, clean_env, table

TIMEOUT_S = 600  # per benchmark; each keeps itself far below this
# Benchmarks whose point is their length: the soak runs 10 minutes, plus starting and stopping
# its thousand processes.
TIMEOUTS_S = {"soak": 900}


def discover(names: List[str]) -> List[Path]:
    scripts = sorted(
        p for p in BENCH_DIR.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_")
    )
    if names:
        wanted = {n.removesuffix(".py") for n in names}
        unknown = wanted - {p.stem for p in scripts}
        if unknown:
            raise SystemExit(f"no such benchmark: {', '.join(sorted(unknown))}")
        scripts = [p for p in scripts if p.stem in wanted]
    return scripts


def run_one(script: Path) -> Dict[str, Any]:
    """Run one benchmark; its result document, or why there is none."""
    result = RESULTS_DIR / f"{script.stem}.json"
    result.unlink(missing_ok=True)  # a stale file must not pass for this run's result
    print(f"\n### {script.name}", flush=True)
    t0 = time.monotonic()
    timeout = TIMEOUTS_S.get(script.stem, TIMEOUT_S)
    try:
        proc = subprocess.run([sys.executable, str(script)], env=clean_env(), timeout=timeout)
        code: Optional[int] = proc.returncode
    except subprocess.TimeoutExpired:
        code = None
    outcome: Dict[str, Any] = {"script": script.name, "seconds": time.monotonic() - t0, "exit": code}
    if code is None:
        outcome["error"] = f"timed out after {timeout} s"
    elif code != 0:
        outcome["error"] = f"exited with status {code}"
    elif not result.exists():
        outcome["error"] = f"wrote no {result.name}"
    else:
        try:
            outcome["document"] = json.loads(result.read_text())
        except ValueError as exc:
            outcome["error"] = f"{result.name} is not JSON: {exc}"
    return outcome


def summary(outcomes: List[Dict[str, Any]]) -> str:
    figures: List[Figure] = []
    for outcome in outcomes:
        name = outcome["script"].removesuffix(".py")
        if "error" in outcome:
            figures.append(Figure(f"{name}: FAILED ({outcome['error']})", float("nan"), "", status="FAILED"))
            continue
        for row in outcome["document"].get("figures", []):
            figures.append(
                Figure(
                    f"{name}: {row.get('figure', '?')}",
                    float(row.get("value", float("nan"))),
                    str(row.get("unit", "")),
                    str(row.get("goal", "")),
                    str(row.get("reference", "")),
                    str(row.get("status", "")),
                )
            )
    return table(figures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    args = parser.parse_args()

    scripts = discover(args.names)
    load = os.getloadavg()[0]
    print(f"{len(scripts)} benchmarks on {os.cpu_count()} CPUs; load average (1 min) before: {load:.2f}")
    if load > 0.5:
        print("  note: other work is running; every figure here competes with it for the CPUs")
    t0 = time.monotonic()
    outcomes = [run_one(script) for script in scripts]
    failed = [o for o in outcomes if "error" in o]
    missed = sum(
        row.get("status") == "MISSED" for o in outcomes for row in o.get("document", {}).get("figures", [])
    )
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    combined = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": time.monotonic() - t0,
        "loadavg_1m_before": load,
        "runs": [{k: v for k, v in o.items() if k != "document"} for o in outcomes],
        "results": {o["script"].removesuffix(".py"): o["document"] for o in outcomes if "document" in o},
    }
    (RESULTS_DIR / "summary.json").write_text(json.dumps(combined, indent=2) + "\n")

    print(f"\n== summary: {len(outcomes)} benchmarks in {combined['seconds']:.0f} s ==")
    print(summary(outcomes))
    print(f"  {missed} figure(s) missed their goal; {len(failed)} benchmark(s) failed.")
    print(f"  -> {(RESULTS_DIR / 'summary.json').relative_to(BENCH_DIR.parent)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
