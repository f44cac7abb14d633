"""A job that does nothing but call ``msmonitor_plugin.step()``, with the plugin's agent running (unless
``--no-init``), driven line by line on stdin so that a test or benchmark can time it while it changes
what sits at the daemon's address.

Prints ``ready pid=N`` after ``init()``. Then, per line on stdin, one answer line on stdout:

* ``run SECONDS`` — ``step()`` in timed batches of 1000 calls (ten unrolled per loop turn) for that
  long; answers ``result <json>``: per-call ns of the batches (median, p99, max), the wall time per
  step over the whole run (what the job loses, stalls included), RSS and threads before and after, and
  the CPU the plugin's link thread used meanwhile;
* ``steps N`` — N plain ``step()`` calls; answers ``done <count>``;
* ``registered`` — answers ``registered yes`` or ``registered no`` (the link's view: an ack came);
* ``status`` — answers ``status <json>`` of RSS, VmHWM and threads.

The garbage collector stays on: this is the job as it runs. An exception from ``step()`` is not caught:
it ends the job with a traceback, which is what the callers look for. End of stdin: exit 0.
"""

import array
import json
import os
import sys
import time

import msmonitor_plugin

CALLS_PER_BATCH = 1000
MAX_BATCHES_PER_S = 50_000  # a batch takes >= 20 µs: far above what a step() call costs


def proc_status() -> dict:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(rest.split()[0])
    return out


def link_tid() -> int:
    agent = msmonitor_plugin.running_agent()
    thread = getattr(getattr(agent, "link", None), "_thread", None)
    return getattr(thread, "native_id", None) or 0


def thread_cpu_s(tid: int) -> float:
    """Seconds on CPU of one thread of this process (0 when it is gone or unknown)."""
    if not tid:
        return 0.0
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def timed_run(seconds: float) -> dict:
    step = msmonitor_plugin.step
    turns = range(CALLS_PER_BATCH // 10)
    clock = time.perf_counter_ns
    tid = link_tid()
    # Room for every sample, filled in before RSS is read: the samples must not pass for plugin memory.
    per_call = array.array("d", bytes(8 * int(seconds * MAX_BATCHES_PER_S + 1000)))
    before, link_before, cpu_before = proc_status(), thread_cpu_s(tid), time.process_time()
    n = 0
    start = clock()
    deadline = start + int(seconds * 1e9)
    while n < len(per_call):
        t0 = clock()
        for _ in turns:
            step(); step(); step(); step(); step(); step(); step(); step(); step(); step()  # noqa: E702  # fmt: skip
        t1 = clock()
        per_call[n] = (t1 - t0) / CALLS_PER_BATCH
        n += 1
        if t1 >= deadline:
            break
    elapsed = clock() - start
    after = proc_status()
    ordered = sorted(per_call[:n])
    return {
        "batches": n,
        "steps": n * CALLS_PER_BATCH,
        "p50_ns": ordered[n // 2],
        "p99_ns": ordered[min(n - 1, (99 * n) // 100)],
        "max_ns": ordered[-1],
        "wall_ns_per_step": elapsed / (n * CALLS_PER_BATCH),
        "seconds": elapsed / 1e9,
        "rss_kib_before": before["VmRSS"],
        "rss_kib_after": after["VmRSS"],
        "hwm_kib": after["VmHWM"],
        "threads_before": before["Threads"],
        "threads_after": after["Threads"],
        "link_cpu_s": thread_cpu_s(tid) - link_before,
        "link_alive": bool(tid) and os.path.exists(f"/proc/self/task/{tid}"),
        "process_cpu_s": time.process_time() - cpu_before,
        "count": msmonitor_plugin.current_step(),
    }


def main() -> int:
    if "--no-init" not in sys.argv:
        msmonitor_plugin.init()
    print(f"ready pid={os.getpid()}", flush=True)
    for line in sys.stdin:
        word, _, arg = line.strip().partition(" ")
        if word == "run":
            print("result " + json.dumps(timed_run(float(arg))), flush=True)
        elif word == "steps":
            for _ in range(int(arg)):
                msmonitor_plugin.step()
            print(f"done {msmonitor_plugin.current_step()}", flush=True)
        elif word == "registered":
            agent = msmonitor_plugin.running_agent()
            yes = agent is not None and agent.link.registered.is_set()
            print(f"registered {'yes' if yes else 'no'}", flush=True)
        elif word == "status":
            print("status " + json.dumps(proc_status()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
