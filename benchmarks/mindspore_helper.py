"""MindSpore's monitor helper at rest: the CPU it costs a training job while nobody asks for a trace.

A real MindSpore job (the published CPU wheel, tests/workloads/mindspore_train.py: a small network,
20 steps a second) runs with ``MSMONITOR_USE_DAEMON=1`` against a real ``dynolog``. MindSpore's
``DynamicProfilerMonitor`` forks its helper, ``worker_dyno_func``, which calls ``poll_dyno()`` again at
once whenever the answer is empty: without pacing in the plugin it spins on the daemon's (microsecond)
replies. Once the helper is registered and folded into its job, the benchmark measures over a window:

* the helper's CPU, utime + stime from ``/proc/<pid>/stat`` (clock ticks), cross-checked with
  ``schedstat`` (nanoseconds), as a share of one core;
* the datagrams the daemon received from the job (``dyno status``: the helper's polls, the training
  process's heartbeat and MindSpore's status reports);
* the training process's own CPU, for scale.

MindSpore's virtual environment is built on first use (tests/peers.py), which takes a few minutes.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Tuple

from _bench import Daemon, Figure, cpu_schedstat_s, cpu_seconds, report, running_daemon, wait_until
from peers import mindspore_job  # tests/, which _bench puts on the path

GOAL_PERCENT = 1.0  # of one core: the "~0 %"


def sample(daemon: Daemon, helper: int, training: int) -> Tuple[float, ...]:
    """(datagrams received, monotonic time, helper CPU by ticks, by schedstat, training process CPU):
    the clock is read right after the daemon answers, then the CPU times, which take microseconds."""
    datagrams = daemon.dyno_json("status")["ipc"]["received"]
    return (datagrams, time.monotonic(), cpu_seconds(helper), cpu_schedstat_s(helper), cpu_seconds(training))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="the measurement window")
    args = parser.parse_args()

    with running_daemon() as daemon:
        job = mindspore_job(daemon)
        try:
            helper = int(job.announced("helper"))
            wait_until(
                lambda: (daemon.process(job.pid) or {}).get("helper_pids") == [helper],
                timeout=60,
                what="the helper to register, folded into its job",
            )
            before = sample(daemon, helper, job.pid)
            time.sleep(args.seconds)  # the measurement window
            after = sample(daemon, helper, job.pid)
            record = daemon.process(job.pid) or {}
        finally:
            job.stop()

    datagrams, elapsed, helper_ticks, helper_sched, training = (b - a for a, b in zip(before, after))
    figures = [
        Figure(
            "idle helper CPU (utime+stime)",
            100 * helper_ticks / elapsed,
            "% of a core",
            f"<= {GOAL_PERCENT}",
            "— (msMonitor's C++ daemon answered in up to 10 ms, which paced the helper)",
        ),
        Figure("idle helper CPU (schedstat)", 100 * helper_sched / elapsed, "% of a core"),
        Figure("datagrams from the job", datagrams / elapsed, "/s"),
        Figure("training process CPU", 100 * training / elapsed, "% of a core"),
    ]
    notes = [
        f"window {elapsed:.1f} s; MindSpore {record.get('versions', {}).get('mindspore')}, CPU, the job at "
        f"step {record.get('current_step')} by its last report",
        "the helper polls through IPCMonitor.PyDynamicMonitorProxy.poll_dyno, paced by the plugin to "
        "at most one poll per POLL_INTERVAL_S",
    ]
    report("mindspore_helper", figures, notes, {"window_s": elapsed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
