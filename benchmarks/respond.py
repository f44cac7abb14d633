"""``dyno respond`` behind Prometheus and Alertmanager (issue 25): from a rank slowing down to the whole
job's traces on disk.

The scene of ``tests/test_respond_alerting.py`` (``tests/alerting.py``): three daemons on 127.0.0.2-4,
a 3-rank gloo job monitored every second, Prometheus 2.42 and Alertmanager 0.25 (Debian's) with deploy/'s
rules and route at test timings (scrape and evaluation 1 s, ``for: 8s``, ``group_wait``/``group_interval``
1 s), ``dyno respond --iterations 2``. Each repetition slows rank 1 (its ``--slow-file``), waits for the
incident to be recorded, analysed and resolved once the rank is back to speed. Per repetition:

* **report → firing**: from the end of the first report of rank 1 that shows the slowdown (its
  aten::sort per call over twice its fastest before, in the daemon's JSONL) to the alert's ``startsAt``
  (the evaluation at which Prometheus turned it firing): scrape, evaluation, and ``for``.
* **firing → webhook**: to the incident's creation in ``dyno respond`` (Alertmanager's ``group_wait``,
  and Prometheus's post to Alertmanager).
* **capture**: from the webhook to the traces of every rank collected and the record written, less the
  traced steps themselves (2 x the slow rank's step time): the goal is 5 s for 3 ranks.
* **analysis**: HTA over the collected set, after the capture.

Medians over the repetitions; run time about 2 minutes. Needs the engines (``make peers`` as root).

    .venv/bin/python benchmarks/respond.py [--repetitions 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from _bench import Figure, report, wait_until
from alerting import ALERT, HOSTS, ITERATIONS, Scene, scene
from engines import PROMETHEUS
from peers import ALERTING_ENGINES

SLOW_RANK = 1
CAPTURE_GOAL_S = 5.0
SORT = "aten::sort"
INCIDENT_TIMEOUT_S = 60.0
STAGES = ("report -> firing", "firing -> webhook", "capture, less the traced steps", "analysis")


def sort_reports(scene_: Scene, rank: int) -> List[Dict[str, float]]:
    """Rank *rank*'s reports as its daemon's JSONL sink wrote them: end (epoch s), aten::sort's time per
    call (s) and the seconds per step (the sort runs once a step)."""
    daemon = scene_.cluster.daemons[HOSTS[rank]]
    path = daemon.workdir / "dynolog_metrics.jsonl"
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        report_ = json.loads(line)["report"]
        for kind in report_.get("kinds", []):
            for name in kind.get("top", []):
                if name.get("name") == SORT and name.get("count"):
                    out.append(
                        {
                            "end": report_["end_ns"] / 1e9,
                            "per_call": name["total_ns"] / name["count"] / 1e9,
                            "step_s": report_["sampled_ns"] / 1e9 / name["count"],
                        }
                    )
    return out


def first_slow_report(scene_: Scene, since: float) -> Optional[Dict[str, float]]:
    reports = sort_reports(scene_, SLOW_RANK)
    # The fastest before: earlier repetitions' slow reports are among them too.
    baseline = min((r["per_call"] for r in reports if r["end"] < since), default=0.0)
    return next((r for r in reports if r["end"] > since and r["per_call"] > 2 * baseline), None)


def epoch(rfc3339: str) -> float:
    """Alertmanager's ``2026-12-02T01:03:52.509324779Z`` as seconds since the epoch."""
    whole, _, fraction = rfc3339.rstrip("Z").partition(".")
    stamp = dt.datetime.fromisoformat(whole).replace(tzinfo=dt.timezone.utc).timestamp()
    return stamp + (float(f"0.{fraction}") if fraction else 0.0)


def noted(incident: Dict[str, Any], prefix: str) -> float:
    """When the incident's timeline says *prefix*."""
    return next(at for at, what in incident["timeline"] if what.startswith(prefix))


def repetition(scene_: Scene) -> Dict[str, float]:
    """From a quiet job (no alert pending or firing): rank 1 slowed until its incident is analysed, then
    back to speed until that incident is resolved."""
    assert scene_.prometheus is not None
    prometheus = scene_.prometheus
    scene_.wait(lambda: not prometheus.alerts(ALERT), INCIDENT_TIMEOUT_S, "no alert pending or firing")
    slowed_at = time.time()
    scene_.slow(SLOW_RANK)
    incident = scene_.wait(
        lambda: next((i for i in scene_.incidents() if i["at"] > slowed_at and i.get("analysis")), None),
        INCIDENT_TIMEOUT_S,
        "the incident",
    )
    scene_.fast(SLOW_RANK)
    assert incident["action"] == "traced", incident
    slow = wait_until(lambda: first_slow_report(scene_, slowed_at), 10, what="the slowed report")
    scene_.wait(
        lambda: next(i for i in scene_.incidents() if i["id"] == incident["id"]).get("resolved_at"),
        INCIDENT_TIMEOUT_S,
        "the resolution",
    )
    fired = epoch(incident["alert"]["startsAt"])
    collected = noted(incident, "collected ")
    return {
        STAGES[0]: fired - slow["end"],
        STAGES[1]: incident["at"] - fired,
        STAGES[2]: collected - incident["at"] - ITERATIONS * slow["step_s"],
        STAGES[3]: noted(incident, "analysed") - collected,
        "traced steps": ITERATIONS * slow["step_s"],
        "suspect rank": float(incident["suspect"]["rank"]),
        "slowest rank (analysis)": float(incident["analysis"].get("slowest_rank") or -1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()
    if not ALERTING_ENGINES.made():
        raise SystemExit(f"{PROMETHEUS} and Alertmanager are missing: {ALERTING_ENGINES.how}")
    rounds: List[Dict[str, float]] = []
    # The JSONL sink says when each report ended; --max: every repetition is traced.
    flags = {"daemon_flags": ("--use-json",), "respond_flags": ("--max", "100/hour")}
    with tempfile.TemporaryDirectory(prefix="msmonitor-bench-respond-") as tmp, scene(
        Path(tmp), **flags
    ) as job:
        for n in range(args.repetitions):
            rounds.append(repetition(job))
            print(f"  repetition {n + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in rounds[-1].items()))
        recorded = job.incidents()
    median = {stage: statistics.median(r[stage] for r in rounds) for stage in STAGES}
    figures = [
        Figure(f"{STAGES[0]} (for: 8s, scrape and evaluation 1 s), median", median[STAGES[0]], "s"),
        Figure(f"{STAGES[1]} (group_wait 1 s), median", median[STAGES[1]], "s"),
        Figure(f"{STAGES[2]}, 3 ranks, median", median[STAGES[2]], "s", goal=f"<= {CAPTURE_GOAL_S}"),
        Figure(f"{STAGES[3]} (HTA, 3 ranks), median", median[STAGES[3]], "s"),
        Figure("slowed report -> analysed incident, median", sum(median.values()), "s"),
    ]
    notes = [
        f"{len(rounds)} repetitions; each slowed rank {SLOW_RANK} until its incident, then resolved it",
        "every incident named rank 1 (the alert's and the analysis's)"
        if all(r["suspect rank"] == r["slowest rank (analysis)"] == SLOW_RANK for r in rounds)
        else "NOT every incident named rank 1: see details",
        f"{len(recorded)} incident(s) recorded for {len(rounds)} slowdowns"
        + ("" if len(recorded) == len(rounds) else ": the others are alerts the machine's load fired"),
    ]
    incidents = [
        {"rank": i["alert"]["labels"].get("rank"), "startsAt": i["alert"]["startsAt"], "action": i["action"]}
        for i in recorded
    ]
    report("respond", figures, notes, {"repetitions": rounds, "incidents": incidents})


if __name__ == "__main__":
    main()
