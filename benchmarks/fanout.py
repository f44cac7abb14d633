"""``dyno`` across many daemons (issue 13): ``status`` on 32 daemons against one, and nputrace on 32 daemons
x 4 processes, command to every process having it.

* 32 real ``dynolog`` processes on 127.0.0.2 … 127.0.0.33, one port, mutual TLS with a server
  certificate naming every address (``dyno certs init --server-hosts ...``), each with private sockets.
* ``status``: three ways, timed as a user runs them (process start to exit), in rounds so that load on
  the machine falls on all alike: ``dyno --hostname 127.0.0.2 status`` (one daemon), ``dyno --hosts
  '127.0.0.[2-33]' status`` (the fan-out), and a shell-style loop of 32 ``dyno --hostname H status``
  one after the other (fewer rounds: it is 32 processes). Goal: the fan-out's median <= 1.5 x one
  daemon's. Bytecode is cached as an installed dyno has it (``cli_startup.py`` says why). Beside the
  wall times, the CPU time of ``dyno`` itself and of all 32 daemons during the fan-out: here the
  daemons' work shares this machine's cores with ``dyno``, where a cluster spreads it over 32 nodes.
* nputrace: behind each daemon 4 simulated plugin processes (``tests/workloads/swarm.py``: real
  processes running the plugin's own agent; a step every 50 ms; a trace writes a small Chrome trace).
  Each round is one ``dyno --json --hosts ... nputrace --start-step -1 --iterations 1 --wait``; "has
  it" is the moment the daemon learnt that the process accepted the trace (READY, from each trace's
  history), measured from the moment ``dyno`` was started (its start-up included, as a user waits for
  it) and from the first daemon's STAGED (the fan-out's own spread). p50 and p99 over the rounds of
  the last process to have it, and over every process of every round.

Run time is about two minutes; every process is stopped on the way out.

    .venv/bin/python benchmarks/fanout.py [--daemons 32] [--processes 4] [--rounds 15]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Sequence, Tuple

from _bench import Daemon, Figure, clean_env, cpu_seconds, percentile, report
from workloads.swarm import SoakConfig, Swarm

DYNO = str(Path(sys.executable).parent / "dyno")
STATUS_GOAL = 1.5  # fan-out to 32 daemons, times one daemon's `dyno status`
STEP_S = 0.05
STATUS_SAMPLES = (
    *("one daemon", "fan-out", "sequential loop"),
    *("one daemon: dyno CPU", "fan-out: dyno CPU", "fan-out: daemons' CPU"),
)


def addresses(n: int) -> List[str]:
    return [f"127.0.0.{i}" for i in range(2, 2 + n)]


@contextlib.contextmanager
def fleet(workdir: Path, n: int, processes: int) -> Iterator[Tuple[List[Daemon], Path]]:
    """*n* daemons on their own loopback addresses and one port, *processes* simulated ones behind each;
    the client's --certs-dir."""
    hosts = addresses(n)
    pki = workdir / "pki"
    subprocess.run(
        [DYNO, "certs", "init", str(pki), "--server-hosts", ",".join(hosts), "--client-name", "bench"],
        check=True,
        capture_output=True,
    )
    daemons: List[Daemon] = []
    swarms: List[Swarm] = []
    try:
        first = start_daemon(workdir, hosts[0], pki, 0)
        daemons.append(first)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            daemons += pool.map(lambda h: start_daemon(workdir, h, pki, first.port), hosts[1:])
        # From this thread: the simulator dies with the thread that started it (PR_SET_PDEATHSIG).
        cfg = SoakConfig(processes=processes, jobs=1, step_s=STEP_S)
        swarms += (Swarm(d, cfg, d.workdir / "swarm.log").start() for d in daemons)
        yield daemons, pki / "client"
    finally:
        for swarm in swarms:
            swarm.kill()
        for daemon in daemons:
            daemon.cleanup()


def start_daemon(workdir: Path, host: str, pki: Path, port: int) -> Daemon:
    args = ["--listen-address", host, "--port", str(port), "--certs-dir", str(pki / "server")]
    return Daemon(workdir / host, args).start()


class Timed(NamedTuple):
    wall_ns: int
    cpu_ns: int  # the command's own CPU time, user and system (clock-tick resolution)
    done: subprocess.CompletedProcess  # type: ignore[type-arg]


def timed(cmd: Sequence[str], env: Dict[str, str]) -> Timed:
    before, t0 = os.times(), time.perf_counter_ns()
    # Pipes, not DEVNULL: with a timeout and no pipe to read, subprocess polls for the exit with a growing
    # sleep, which rounds every figure up to its next poll.
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    elapsed, after = time.perf_counter_ns() - t0, os.times()
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr}{done.stdout[-3000:]}")
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    return Timed(elapsed, int(cpu * 1e9), done)


def status_rounds(
    base: List[str], daemons: List[Daemon], env: Dict[str, str], rounds: int, loops: int
) -> Dict[str, List[int]]:
    """Nanoseconds: wall time of one daemon's status, the fan-out's, and (in the first *loops* rounds)
    the loop's; CPU time of dyno in the first two, and of all the daemons during the fan-out."""
    hosts = addresses(len(daemons))
    samples: Dict[str, List[int]] = {name: [] for name in STATUS_SAMPLES}
    for i in range(rounds):
        one = timed([*base, "--hostname", hosts[0], "status"], env)
        served = daemons_cpu_s(daemons)
        fan = timed([*base, "--hosts", f"127.0.0.[2-{1 + len(hosts)}]", "status"], env)
        served = daemons_cpu_s(daemons) - served
        summary = fan.done.stdout.splitlines()[-1]
        assert summary.startswith(f"{len(hosts)} hosts: {len(hosts)} effective"), fan.done.stdout
        samples["one daemon"].append(one.wall_ns)
        samples["fan-out"].append(fan.wall_ns)
        samples["one daemon: dyno CPU"].append(one.cpu_ns)
        samples["fan-out: dyno CPU"].append(fan.cpu_ns)
        samples["fan-out: daemons' CPU"].append(int(served * 1e9))
        if i < loops:
            loop = sum(timed([*base, "--hostname", host, "status"], env).wall_ns for host in hosts)
            samples["sequential loop"].append(loop)
    return samples


def daemons_cpu_s(daemons: List[Daemon]) -> float:
    return sum(cpu_seconds(d.proc.pid) for d in daemons if d.proc is not None)


def trace_round(base: List[str], hosts: List[str], out: Path, env: Dict[str, str]) -> Dict[str, List[float]]:
    """One nputrace on every host; per process, seconds from dyno's start and from the first STAGED to
    READY."""
    t0 = time.time()
    args = [
        "--start-step",
        "-1",
        "--iterations",
        "1",
        "--log-file",
        str(out),
        "--wait",
        "--wait-timeout",
        "60",
    ]
    done = timed([*base, "--json", "--hosts", ",".join(hosts), "nputrace", *args], env).done
    processes = [p for host in json.loads(done.stdout) for p in host["answer"]["trace"]["processes"]]
    staged = min(h["at"] for p in processes for h in p["history"] if h["phase"] == "TRACE_PHASE_STAGED")
    ready = [next(h["at"] for h in p["history"] if h["phase"] == "TRACE_PHASE_READY") for p in processes]
    return {"from_dyno": [r - t0 for r in ready], "from_first_staged": [r - staged for r in ready]}


def ms(samples_ns: Sequence[float]) -> float:
    return statistics.median(samples_ns) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--daemons", type=int, default=32)
    parser.add_argument("--processes", type=int, default=4, help="simulated processes behind each daemon")
    parser.add_argument("--rounds", type=int, default=15, help="status rounds, and nputrace rounds")
    parser.add_argument("--loops", type=int, default=3, help="rounds that also time the sequential loop")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="msmonitor-fanout-") as tmp, fleet(
        Path(tmp), args.daemons, args.processes
    ) as (daemons, client):
        env = clean_env(PYTHONPYCACHEPREFIX=str(Path(tmp) / "pyc"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        base = [DYNO, "--port", str(daemons[0].port), "--certs-dir", str(client)]
        hosts = addresses(args.daemons)
        status_rounds(base, daemons, env, 1, 0)  # warm-up: fills the bytecode cache
        samples = status_rounds(base, daemons, env, args.rounds, args.loops)
        traces = [trace_round(base, hosts, Path(tmp) / "traces", env) for _ in range(args.rounds)]

    median = {name: ms(values) for name, values in samples.items()}
    last = [max(t["from_dyno"]) for t in traces]
    spread = [max(t["from_first_staged"]) for t in traces]
    every = [s for t in traces for s in t["from_dyno"]]
    n, per = args.daemons, args.processes
    figures = [
        Figure("dyno status, one daemon: median", median["one daemon"], "ms"),
        Figure(f"dyno --hosts (x{n}) status: median", median["fan-out"], "ms"),
        Figure(f"{n} x dyno status one after another: median", median["sequential loop"], "ms"),
        Figure(f"status on {n} / on one", median["fan-out"] / median["one daemon"], "x", f"<= {STATUS_GOAL}"),
        Figure(f"status: loop of {n} / fan-out", median["sequential loop"] / median["fan-out"], "x"),
        Figure("dyno status, one daemon: dyno's CPU, median", median["one daemon: dyno CPU"], "ms"),
        Figure(f"dyno --hosts (x{n}) status: dyno's CPU, median", median["fan-out: dyno CPU"], "ms"),
        Figure(
            f"dyno --hosts (x{n}) status: the daemons' CPU, median", median["fan-out: daemons' CPU"], "ms"
        ),
        Figure(
            f"nputrace {n}x{per}: dyno start -> every process has it, p50", percentile(last, 50) * 1e3, "ms"
        ),
        Figure(
            f"nputrace {n}x{per}: dyno start -> every process has it, p99", percentile(last, 99) * 1e3, "ms"
        ),
        Figure(f"nputrace {n}x{per}: first daemon -> last process, p50", percentile(spread, 50) * 1e3, "ms"),
        Figure(f"nputrace {n}x{per}: first daemon -> last process, p99", percentile(spread, 99) * 1e3, "ms"),
        Figure(f"nputrace {n}x{per}: per process, from dyno start, p50", percentile(every, 50) * 1e3, "ms"),
        Figure(f"nputrace {n}x{per}: per process, from dyno start, p99", percentile(every, 99) * 1e3, "ms"),
    ]
    notes = [
        f"{args.rounds} status rounds (the sequential loop in {args.loops}) after one warm-up; medians of "
        "wall time per command; mutual TLS on every call.",
        f"{args.rounds} nputrace rounds, {n * per} processes each (READY as the daemon learnt it); 'dyno "
        "start' includes dyno's own start-up (status on one daemon above is that floor).",
        "All daemons, processes and dyno share this machine's CPUs (the daemons' CPU above is what a "
        "cluster spreads over its nodes); the load average when it finished is in the JSON.",
    ]
    details = {
        "status_ms": {name: [v / 1e6 for v in values] for name, values in samples.items()},
        "nputrace_last_s": last,
        "nputrace_spread_s": spread,
    }
    report("fanout", figures, notes, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
