"""Soak: 1000 simulated plugin processes against one real ``dynolog`` for 10 minutes, with dyno commands.

The processes come from ``tests/workloads/swarm.py`` (its docstring says how they are simulated and why
that is what the daemon sees from real jobs): each a real process with its own pid, registering,
heartbeating every second (``mm.hello``, answered ``mm.ack``), reporting npu-monitor metrics every
second (``mm.metrics``: 4 kinds, top 10 of 20 names, ~4 KB), and answering the commands the daemon
pushes (``mm.monitor``; ``mm.event`` ready, running, finished, with a trace file written). Its phases:

* ramp-up: the processes start (500 a second) until every one has its ``mm.ack``;
* ``dyno npu-monitor --npu-monitor-start --report-interval-s 1`` to all of them;
* then, one command every 3 s through the real CLI (``dyno --json``), job after job (10 jobs of 100):
  the job's monitor stopped, the job traced for 2 steps (``nputrace``), ``status``, the trace's
  progress 6 s after it was sent (``trace <id>``), the job's monitor started again, ``processes``;
* after the warm-up (by default 210 s: every job has had each command once, plus 30 s) the daemon's
  VmRSS and CPU (utime + stime from ``/proc/<pid>/stat``) are taken, and again at the end; VmRSS is
  sampled every second in between (peak, and a least-squares slope, so a leak shows apart from
  allocator noise), and the run-queue wait of its event loop (schedstat) says what it waited for CPUs;
* at the end: the registry (``dyno processes``) against the processes' pids, the daemon's log for
  processes it forgot while they ran; then every process leaves, and the datagrams each socket handed
  to the kernel are summed and compared with the daemon's ``ipc.received`` (once it has read them all),
  and ``received`` with ``handled + malformed + rejected_senders``.

    .venv/bin/python benchmarks/soak.py                                # 1000 processes, 600 s
    .venv/bin/python benchmarks/soak.py --processes 100 --duration 60 --warmup 20

Every process started here is stopped on the way out (the simulator's whole process group).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any, Dict, List

from _bench import Figure, report, running_daemon
from workloads.swarm import SoakConfig, SoakResult, run_soak

RSS_GROWTH_GOAL_MIB = 5


def latencies(result: SoakResult) -> Dict[str, Dict[str, float]]:
    by_name: Dict[str, List[float]] = {}
    for run in result.commands:
        by_name.setdefault(run.name, []).append(run.seconds)
    return {
        name: {"count": len(v), "median_s": statistics.median(v), "max_s": max(v)}
        for name, v in by_name.items()
    }


def figures_of(r: SoakResult) -> List[Figure]:
    cfg, swarm, ipc = r.config, r.swarm, r.ipc
    n = cfg.processes
    sent = swarm.get("sent", {})
    refused = sum(swarm.get("refused", {}).values())
    attempts = refused + r.sent_total
    monitored = [c for c in r.commands if c.effective is not None]
    traces = [c for c in r.commands if c.name == "trace"]
    figs = [
        Figure("processes registered (ramp-up)", r.ramp_s, "s"),
        Figure("daemon RSS after warm-up (VmRSS)", r.rss_kib_warm / 1024, "MiB"),
        Figure("daemon RSS at the end", r.rss_kib_end / 1024, "MiB"),
        Figure(
            "daemon RSS growth after warm-up", r.rss_growth_kib / 1024, "MiB", f"<= {RSS_GROWTH_GOAL_MIB}"
        ),
        Figure("daemon RSS peak after warm-up", r.rss_kib_peak / 1024, "MiB"),
        Figure("daemon RSS trend after warm-up", r.rss_slope_kib_per_min() / 1024, "MiB/min"),
        Figure("daemon CPU after warm-up", r.cpu_pct, "% of a core"),
        Figure("daemon waiting for a CPU (run queue)", r.wait_pct, "% of the time"),
        Figure("simulated processes: CPU, all together", r.swarm_cpu_pct, "% of a core"),
        Figure("simulated processes: memory (PSS), all together", r.swarm_pss_kib / 1024, "MiB"),
        Figure("datagrams the processes sent", r.sent_total, ""),
        Figure(
            "  of them hellos / metrics chunks", sent.get("mm.hello", 0), f"/ {sent.get('mm.metrics', 0)}"
        ),
        Figure("datagrams sent, not read by the daemon", r.unaccounted_sent, "", "<= 0"),
        Figure(
            "datagrams read, not handled or counted dropped",
            float("nan") if r.unaccounted_read is None else r.unaccounted_read,
            "",
            "<= 0",
        ),
        Figure(
            "datagrams malformed + from rejected senders",
            ipc["malformed"] + ipc["rejected_senders"],
            "",
            "<= 0",
        ),
        Figure(
            "sends the kernel refused (daemon's queue full)", 100 * refused / max(attempts, 1), "% of tries"
        ),
        Figure(
            "replies the daemon could not deliver (send_errors)",
            ipc.get("send_errors", 0),
            f"of {ipc.get('replied', 0) + ipc.get('send_errors', 0)}",
        ),
        Figure("commands sent", len(r.commands), ""),
        Figure("commands not answered", len(r.unanswered), "", "<= 0"),
        Figure(
            "monitor/trace commands: processes that took them",
            100 * sum(c.triggered for c in monitored) / max(1, sum(c.matched for c in monitored)),
            "% of matched",
        ),
        Figure(
            "nputrace: processes whose trace finished within 6 s",
            100 * sum(c.finished for c in traces) / max(1, sum(c.matched for c in traces)),
            "% of those that took it",
        ),
        Figure("registry at the end", r.registry_at_end, f"of {n}", f">= {n}"),
        Figure("registry, fewest listed during the run", r.registry_min_seen, f"of {n}"),
        Figure("processes forgotten while they ran", r.forgotten, "", "<= 0"),
        Figure("registry after every process left", r.registry_after_leave, "", "<= 0"),
    ]
    for name, lat in latencies(r).items():
        figs.append(Figure(f"dyno {name}: median / max", lat["median_s"], f"s / {lat['max_s']:.2f} s"))
    return figs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds from the first command")
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds before memory and CPU are taken (default: once every job had each command, + 30 s)",
    )
    parser.add_argument("--command-every", type=float, default=3.0, help="seconds between dyno commands")
    parser.add_argument("--keepalive-s", type=float, default=60.0, help="the daemon's --process-keepalive-s")
    parser.add_argument(
        "--heartbeat-s",
        type=float,
        default=1.0,
        help="seconds between hellos (0: as the plugin, keep-alive/3)",
    )
    parser.add_argument(
        "--reports-in-phase",
        action="store_true",
        help="reports every interval from the start command, as the plugin does, all in phase",
    )
    args = parser.parse_args()
    cfg = SoakConfig(
        processes=args.processes,
        duration_s=args.duration,
        command_every_s=args.command_every,
        keepalive_s=args.keepalive_s,
        heartbeat_s=args.heartbeat_s,
        reports_in_phase=args.reports_in_phase,
    )
    # Until every job has been stopped, traced and restarted once, the daemon is still allocating what
    # it keeps for good; measured from 60 s, a 10-minute run counts that first pass as growth.
    cfg.warmup_s = (
        args.warmup if args.warmup is not None else min(cfg.plan_cycle_s() + 30, cfg.duration_s / 2)
    )
    with running_daemon(*cfg.daemon_args()) as daemon:
        result = run_soak(daemon, cfg, daemon.workdir, say=lambda line: print(line, flush=True))
    swarm: Dict[str, Any] = result.swarm
    notes = [
        f"{cfg.processes} processes in {cfg.jobs} jobs for {cfg.duration_s:.0f} s "
        f"(measured from {cfg.warmup_s:.0f} s, {result.measured_s:.0f} s); hello every "
        f"{cfg.heartbeat_s:g} s, daemon keep-alive {cfg.keepalive_s:g} s; metrics every "
        f"{cfg.report_interval_s} s ({cfg.kinds}), "
        + ("in phase after each start command" if cfg.reports_in_phase else "spread over the second")
        + f"; a dyno command every {cfg.command_every_s:g} s.",
        f"daemon counters at the end: {result.ipc}; dropped: {result.dropped}",
        f"processes sent {swarm.get('sent')}, had refused {swarm.get('refused')} (retried), lost "
        f"{swarm.get('lost')} (the link's queue of 32 overflowed, or still queued at exit), received "
        f"{swarm.get('received')}; {swarm.get('registrations')} registrations (a refused hello makes the "
        f"link register again); longest time between two hellos taken "
        f"{swarm.get('longest_silence_s', 0):.1f} s.",
        f"RSS (KiB): ready {result.rss_kib_ready}, warm {result.rss_kib_warm}, end {result.rss_kib_end}, "
        f"after every process left {result.rss_kib_after_leave}.",
        "the simulated processes run at nice 10 and share the machine's cores with the daemon (a node would "
        "give them cores of their own); what they and other work on the machine take from the daemon shows "
        "as its event loop's run-queue wait.",
    ]
    details = {"result": result.to_dict(), "command_latency": latencies(result)}
    report("soak", figures_of(result), notes, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
