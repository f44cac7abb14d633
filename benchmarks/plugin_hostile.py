"""The plugin against a hostile daemon: what ``step()`` costs, and what the job keeps, when whatever sits
at the daemon's address misbehaves.

One job process per case (``tests/workloads/step_loop.py``: ``msmonitor_plugin.init()``, then nothing
but ``step()`` in timed batches of 1000 calls, ten unrolled per loop turn, the garbage collector on).
At the daemon's address (``KINETO_IPC_SOCKET_DIR``, a private directory) sits, per case:

* **normal daemon** — a real ``dynolog``; the job registers first;
* **no daemon** — nothing: every heartbeat fails, and the link backs off;
* **flooding daemon** — ``tests/workloads/hostile_daemon.py flood``: a fake that binds the daemon's
  address itself (the plugin takes datagrams only from there) and sends real wire-encoded
  ``mm.command`` datagrams, each followed by an ``mm.ack``, as fast as the plugin's socket takes them,
  reading the plugin's answers as a daemon does;
* **stuck flooding daemon** — ``flood-deaf``: the same with npu-monitor start among the commands, and
  reading nothing, so the plugin's answers meet a full queue;
* **garbage** — ``garbage``: random bytes, lying headers, JSON of the wrong shape or nested past the
  recursion limit, datagrams over 64 KiB, all from the daemon's address.

Each case: a quiet phase (the fake bound and silent), then the hostile phase; ``step()`` is timed in
both. Per phase: the median and p99 over the batches of the per-call time, the wall time per step over
the phase (stalls included: what the job loses), the CPU the plugin's link thread used, and RSS before
and after. Afterwards the fake goes, a real ``dynolog`` starts at the same address, and the benchmark
waits for it to list the job (the link still works); then the job's stdin closes and it must exit 0
within 10 s with no traceback on stderr. Nothing is asserted: a failure is a row of the table.

    .venv/bin/python benchmarks/plugin_hostile.py [--seconds 6] [--quiet-seconds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from _bench import REPO, Daemon, Figure, clean_env, report, stop_process, wait_until
from harness import read_line_until

WORKLOADS = REPO / "tests" / "workloads"
CASES = {
    "normal daemon": "daemon",
    "no daemon": "",
    "flooding daemon": "flood",
    "stuck flooding daemon": "flood-deaf",
    "garbage": "garbage",
}
EXIT_WAIT_S = 10.0
REGISTER_WAIT_S = 20.0  # a heartbeat is due within 5 s; the rest is for a loaded machine
STEP_GOAL = "<= 500"  # as benchmarks/step.py holds step() with nothing pending


class Job:
    """The step_loop workload, driven line by line; stderr kept apart, to look for tracebacks."""

    def __init__(self, socket_dir: str, err: Path) -> None:
        self._err = err.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKLOADS / "step_loop.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=clean_env(KINETO_IPC_SOCKET_DIR=socket_dir),
        )
        self.pid = int(read_line_until(self.proc, "ready", 60).split("pid=")[1])

    def ask(self, line: str, answer: str, timeout: float = 60.0) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return read_line_until(self.proc, answer, timeout).split(" ", 1)[1].strip()

    def run(self, seconds: float) -> Dict[str, Any]:
        return json.loads(self.ask(f"run {seconds}", "result", seconds + 60))  # type: ignore[no-any-return]

    def finish(self) -> Dict[str, Any]:
        """Close stdin (the job's end) and wait for the exit; a job that hangs is killed."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        t0 = time.monotonic()
        try:
            code: Optional[int] = self.proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
        waited = time.monotonic() - t0
        stop_process(self.proc, timeout=5)
        self._err.close()
        stderr = Path(self._err.name).read_text(errors="replace")
        return {
            "exit_code": code,
            "exit_s": waited,
            "hung_at_exit": code is None,
            "tracebacks": stderr.count("Traceback"),
            "stderr_tail": stderr[-2000:],
        }

    def kill(self) -> None:
        if self.proc.poll() is None:
            stop_process(self.proc, timeout=2)
        self._err.close()


class Fake:
    """hostile_daemon.py at the daemon's address: ready once the job's first hello came."""

    def __init__(self, socket_dir: str, mode: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKLOADS / "hostile_daemon.py"), socket_dir, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )

    def ready(self) -> None:
        read_line_until(self.proc, "ready", 60)

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def stop(self) -> Dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        line = read_line_until(self.proc, "stats", 30)
        stop_process(self.proc)
        return json.loads(line.split(" ", 1)[1])  # type: ignore[no-any-return]

    def kill(self) -> None:
        if self.proc.poll() is None:
            stop_process(self.proc, timeout=2)


def listed(daemon: Daemon, pid: int) -> bool:
    return any(p.get("pid") == pid for p in daemon.processes())


@contextlib.contextmanager
def workspace() -> Iterator[Tuple[Path, Path]]:
    """A short socket directory (socket paths are limited to 107 bytes) and a work folder."""
    sockets = Path(tempfile.mkdtemp(prefix="mm", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="msmonitor-bench-hostile-"))
    try:
        yield sockets, work
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def run_case(label: str, mode: str, quiet_s: float, hostile_s: float) -> Dict[str, Any]:
    out: Dict[str, Any] = {"case": label, "mode": mode}
    with workspace() as (sockets, work), contextlib.ExitStack() as stack:
        daemons: List[Daemon] = []
        stack.callback(lambda: [d.cleanup() for d in daemons])
        fake: Optional[Fake] = None
        if mode == "daemon":
            daemons.append(Daemon(work / "d0", socket_dir=sockets).start())
        elif mode:
            fake = Fake(str(sockets), mode)
            stack.callback(fake.kill)
        job = Job(str(sockets), work / "job.stderr")
        stack.callback(job.kill)
        if mode == "daemon":
            wait_until(lambda: listed(daemons[0], job.pid), REGISTER_WAIT_S, "the job's registration")
        if fake is not None:
            fake.ready()
        job.run(0.5)  # warm-up
        out["quiet"] = job.run(quiet_s)
        if fake is not None:
            fake.go()
        out["hostile"] = job.run(hostile_s)
        out["job_status_after"] = json.loads(job.ask("status", "status"))
        if fake is not None:
            out["fake"] = fake.stop()
        # Afterwards: does a real daemon at the same address get the job's registration?
        if mode != "daemon":
            daemons.append(Daemon(work / "d1", socket_dir=sockets).start())
        t0 = time.monotonic()
        try:
            wait_until(lambda: listed(daemons[-1], job.pid), REGISTER_WAIT_S, "registration afterwards")
            out["registered_after_s"] = time.monotonic() - t0
        except AssertionError:
            out["registered_after_s"] = float("nan")
        out["exit"] = job.finish()
    return out


def figures_of(cases: List[Dict[str, Any]]) -> List[Figure]:
    figs: List[Figure] = []
    for c in cases:
        q, h, label = c["quiet"], c["hostile"], c["case"]
        fake = c.get("fake", {})
        taken = fake.get("sent", {}).get("datagrams", 0) / fake["seconds"] if fake else float("nan")
        ex = c["exit"]
        figs += [
            Figure(f"{label}: step() median", h["p50_ns"], "ns", STEP_GOAL),
            Figure(f"{label}: step() median, quiet phase before", q["p50_ns"], "ns"),
            Figure(f"{label}: step() p99 of batches", h["p99_ns"], "ns"),
            Figure(f"{label}: wall time per step (stalls included)", h["wall_ns_per_step"], "ns"),
            Figure(f"{label}:   the same, quiet phase before", q["wall_ns_per_step"], "ns"),
            Figure(f"{label}: link thread CPU", 100 * h["link_cpu_s"] / h["seconds"], "% of a core"),
            Figure(f"{label}: datagrams the plugin took", taken, "/s"),
            Figure(
                f"{label}: RSS growth over the hostile phase",
                (h["rss_kib_after"] - h["rss_kib_before"]) / 1024,
                "MiB",
                "<= 20",
            ),
            Figure(f"{label}: RSS at the end", h["rss_kib_after"] / 1024, "MiB"),
            Figure(
                f"{label}: registered with a real daemon afterwards",
                c["registered_after_s"],
                "s",
                f"<= {REGISTER_WAIT_S:.0f}",
            ),
            Figure(
                f"{label}: job exited 0 within {EXIT_WAIT_S:.0f} s (1 = yes)",
                float(ex["exit_code"] == 0),
                "",
                ">= 1",
            ),
            Figure(f"{label}: tracebacks on the job's stderr", ex["tracebacks"], "", "<= 0"),
        ]
    return figs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="hostile phase of each case")
    parser.add_argument("--quiet-seconds", type=float, default=2.0, help="quiet phase before it")
    parser.add_argument("cases", nargs="*", help=f"cases to run (default: all): {', '.join(CASES)}")
    args = parser.parse_args()
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"no such case: {', '.join(sorted(unknown))}")
    t0 = time.monotonic()
    cases = []
    for label, mode in CASES.items():
        if args.cases and label not in args.cases:
            continue
        print(f"[{time.monotonic() - t0:5.1f} s] {label}", flush=True)
        cases.append(run_case(label, mode, args.quiet_seconds, args.seconds))
    notes = [
        f"one job process per case; quiet phase {args.quiet_seconds:g} s, hostile phase {args.seconds:g} s; "
        f"{time.monotonic() - t0:.0f} s in all",
        "step(): per-call ns over batches of 1000 calls (loop included), gc on; the wall time per step "
        "includes every stall (the GIL held by the link thread, the CPU taken by other processes)",
        "datagrams the plugin took: what the fake's blocking sends got into the plugin's socket, per s",
    ]
    for c in cases:
        if c["exit"]["hung_at_exit"] or c["exit"]["tracebacks"]:
            notes.append(f"{c['case']}: job stderr tail: {c['exit']['stderr_tail'][-600:]!r}")
    report("plugin_hostile", figures_of(cases), notes, {"cases": cases})
    return 0


if __name__ == "__main__":
    sys.exit(main())
