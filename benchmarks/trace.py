"""On-demand traces (issue 4): command to delivery, command to first recorded step, step time while staged.

Real processes throughout: a ``dynolog`` on private sockets, a CPU PyTorch training loop padded to 20 ms
a step (``tests/workloads/train.py``) with the plugin active, and two stock PyTorch loops with
``KINETO_USE_DAEMON=1`` (one with a 1 s poll through ``KINETO_CONFIG``, one with Kineto's default 5 s).
Commands are ``NpuTrace`` / ``GpuTrace`` RPCs on a warm in-process gRPC channel; ``t_send`` is
``time.time()`` just before the call. Every other instant is a wall-clock time on the same host:

* in the plugin process, from ``_trace_probe.py`` (the moment the plugin's tracer took the pushed
  command, and the moment each phase was reported — RUNNING only after the profiler has started);
* in the daemon, the ``updated_at`` of each phase of the trace, read by ``WatchTrace``;
* in the training loop, each step's start and the time its work took (``train.py --report-steps``).

1. Command → delivery. Plugin: ``t_send`` → the plugin took the command (push). 20 commands, each
   ``--start-step -1 --iterations 1`` on one process, the next sent once the previous has FINISHED (there
   is no cancel), after a random pause so that commands land at random points of a step. Kineto:
   ``t_send`` → DELIVERED (the poll that took it); a random pause of up to one poll interval before each
   command, so the phase of the poll is random as for a user.
2. Command → first recorded step, ``--start-step -1`` on the 20 ms loop: ``t_send`` → RUNNING (the
   profiler is running and the first recorded step begins), and → FINISHED (trace written).
3. Step time while a trace is staged: on one fresh process, idle and staged windows of the same number
   of steps, alternating (idle, staged, idle, ... idle). A staged window is the steps before the start
   step of a trace armed to start just after it; that trace runs (one step) and is written before the
   next idle window begins. The effect is the difference of the pooled staged and idle steps' median and
   p90 work time; the noise floor, two idle runs against each other (even against odd idle windows);
   the verdict, how often relabelling the windows every possible way gives a difference as large. The
   same question in isolation, in this process: ``step()`` with a staged trace's boundary check
   installed against ``step()`` with nothing pending, timed as ``step.py`` times it, interleaved.

Run time is 60 to 75 s; every process is stopped on the way out. Figures are not asserted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import grpc

from _bench import BENCH_DIR, Daemon, Figure, Workload, percentile, report, running_daemon, wait_until
from dynolog.edge.rpc import convert
from dynolog.kinds.nputrace import NpuTrace
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import KINETO_1S_CONFIG
from msmonitor_contract import configtext, wire
from msmonitor_contract.vocabulary import CommandKind, TracePhase
from msmonitor_plugin.steps import StepCounter
from msmonitor_plugin.trace.session import TraceSession
from msmonitor_plugin.trace.spec import parse
from step import time_calls

PROBE = BENCH_DIR / "_trace_probe.py"
STEP_MS = 20.0
FOLLOW_TIMEOUT_S = 60.0  # one trace, command to files; far beyond a healthy one
KINETO_DEFAULT_POLL_S = 5.0


@dataclass
class Command:
    """One trace command and what became of it, times in epoch seconds."""

    trace_id: str
    sent: float
    replied: float
    phases: Dict[str, float] = field(default_factory=dict)  # phase -> the daemon's updated_at
    final: str = ""
    error: str = ""
    retries: int = 0  # sends refused as busy before this one took

    def since_sent(self, phase: str) -> Optional[float]:
        t = self.phases.get(phase)
        return None if t is None else t - self.sent


# --- commands and their lifecycle --------------------------------------------------------------------


def submit(call: Callable[[], pb.CommandResponse], busy_for_s: float = 10.0) -> Command:
    """Send until effective; a refusal as busy (Kineto shows busy for a poll after its trace) is retried."""
    deadline = time.monotonic() + busy_for_s
    retries = 0
    while True:
        sent = time.time()
        reply = call()
        replied = time.time()
        if reply.command_status == pb.COMMAND_STATUS_EFFECTIVE:
            return Command(reply.trace_id, sent, replied, retries=retries)
        if reply.reason != pb.REASON_TRACE_BUSY or time.monotonic() > deadline:
            raise RuntimeError(f"command ineffective: {reply.message}")
        retries += 1
        time.sleep(0.05)


def follow(stub: pb_grpc.DynologStub, command: Command) -> Command:
    """Watch the trace until done; the first sight of each phase carries the time it was entered."""
    try:
        for info in stub.WatchTrace(pb.GetTraceRequest(trace_id=command.trace_id), timeout=FOLLOW_TIMEOUT_S):
            process = info.processes[0]
            phase = pb.TracePhase.Name(process.phase).removeprefix("TRACE_PHASE_")
            command.phases.setdefault(phase, process.updated_at)
            command.final, command.error = phase, process.error
            if info.done:
                break
    except grpc.RpcError as exc:
        command.error = f"WatchTrace: {exc.code().name}"
    return command


def npu_trace(pid: int, out: str, start_step: int, iterations: int) -> pb.NpuTraceRequest:
    """What `dyno nputrace --activities CPU` sends, with its defaults."""
    return pb.NpuTraceRequest(
        targets=pb.Targets(pids=[pid]),
        log_file=out,
        start_step=start_step,
        iterations=iterations,
        activities=["CPU"],
        profiler_level="Level0",
        aic_metrics="AiCoreNone",
        data_simplification=True,
        export_type="Text",
    )


def process_info(stub: pb_grpc.DynologStub, pid: int) -> Optional[pb.ProcessInfo]:
    return next((p for p in stub.ListProcesses(pb.ListProcessesRequest()).processes if p.pid == pid), None)


# --- what the processes wrote --------------------------------------------------------------------------


def read_json(path: Path) -> Dict[str, Any]:
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def probe_times(events: Dict[str, Any]) -> Dict[str, Dict[str, float]]:
    """trace id -> {"accept": t, "READY": t, "RUNNING": t, ...}: the first of each, from inside the process.

    Phases are named as the daemon names them (the plugin's wire says ``ready``, the daemon ``READY``).
    """
    out: Dict[str, Dict[str, float]] = {}
    for e in events.get("events", []):
        what = e["what"] if e["what"] == "accept" else e["what"].upper()
        out.setdefault(e["trace_id"], {}).setdefault(what, e["t"])
    return out


def work_ms(steps: Sequence[Dict[str, float]]) -> List[float]:
    return [s["work_s"] * 1000 for s in steps]


def stats_ms(values: Sequence[float]) -> Dict[str, float]:
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "max": max(values) if values else float("nan"),
    }


def spread(samples: Sequence[Optional[float]], scale: float = 1000.0) -> Dict[str, float]:
    """p50 / p90 / max of the samples that exist, times *scale* (seconds -> ms by default)."""
    return stats_ms([s * scale for s in samples if s is not None])


# --- 3. step time: idle, staged, idle -----------------------------------------------------------------


def step_time_cycles(
    stub: pb_grpc.DynologStub, pid: int, out: str, steps: int, cycles: int
) -> Dict[str, Any]:
    """Idle and staged windows, alternating: idle, staged (a trace armed to start just after), idle, ...

    A staged trace cannot be withdrawn, so each one runs (one step) before the next idle window, which
    starts once it has FINISHED — its file written, its writer thread gone — and the process settled.
    """
    window_s = steps * STEP_MS / 1000 * 1.1 + 0.2
    idle: List[Tuple[float, float]] = []
    staged: List[Command] = []
    time.sleep(0.5)  # past the first steps after start-up
    for cycle in range(cycles + 1):
        t0 = time.time()
        time.sleep(window_s)
        idle.append((t0, time.time()))
        if cycle == cycles:
            break
        info = process_info(stub, pid)
        if info is None:
            raise RuntimeError(f"process {pid} is no longer registered")
        # The daemon's step count is as of the last heartbeat; extrapolate to now at the padded step time.
        now_step = info.current_step + int(info.last_seen_s * 1000 / STEP_MS)
        start = now_step + int(steps * 1.1) + 25
        call = functools.partial(stub.NpuTrace, npu_trace(pid, out, start, 1), timeout=10)
        staged.append(follow(stub, submit(call)))
        time.sleep(0.2)
    return {"idle": idle, "staged": staged}


def window_steps(
    steps: List[Dict[str, float]], t0: float, t1: float, n: int, last: bool = False
) -> List[Dict[str, float]]:
    """The first (or last) *n* whole steps that began after *t0* and ended before *t1*."""
    inside = [s for s in steps if t0 <= s["t"] and s["t"] + s["work_s"] < t1]
    return inside[-n:] if last else inside[:n]


def pooled(windows: Sequence[Sequence[float]], q: float) -> float:
    return percentile([x for w in windows for x in w], q)


def relabelled(idle: List[List[float]], staged: List[List[float]], q: float) -> float:
    """Share of all ways to call len(staged) of the windows "staged" whose difference is as large as the
    real one: how often chance alone (which window is which) gives as big an effect. 1.0: none at all."""
    windows = idle + staged
    observed = abs(pooled(staged, q) - pooled(idle, q))
    picks = list(itertools.combinations(range(len(windows)), len(staged)))
    as_large = 0
    for pick in picks:
        chosen = set(pick)
        b = [w for i, w in enumerate(windows) if i in chosen]
        a = [w for i, w in enumerate(windows) if i not in chosen]
        as_large += abs(pooled(b, q) - pooled(a, q)) >= observed - 1e-12
    return as_large / len(picks)


def boundary_work_ms(steps: List[Dict[str, float]], at: float) -> Optional[float]:
    """Work time of the step during which *at* fell (the profiler starts inside a step's optimizer hook)."""
    for s in steps:
        if s["t"] <= at <= s["t"] + s["work_s"]:
            return s["work_s"] * 1000
    return None


def boundary_cost_ns(rounds: int = 40, batches: int = 50) -> Dict[str, float]:
    """Per-call ns of ``step()``: nothing pending, and a trace staged far ahead (the daemon's own text)."""
    request = npu_trace(0, "/tmp/msmonitor-bench-trace", 10**12, 1)
    # The policy renders its text from the request alone; the store and delivery it holds are unused.
    text = configtext.with_trace_id(NpuTrace(None, None).text(convert.command(NpuTrace, request)), "1")  # type: ignore[arg-type]
    counter = StepCounter()
    session = TraceSession(
        parse(wire.Command(kind=CommandKind.NPUTRACE, trace_id="1", config=text)),
        counter,
        lambda e: None,
        lambda: None,
    )
    session.arm()  # READY: the counter now calls the session's boundary check at every step
    staged = counter.pending
    if staged is None or session.phase != TracePhase.READY:
        raise RuntimeError(f"the staged trace did not arm: {session.phase}")
    samples: Dict[str, List[float]] = {"idle": [], "staged": []}
    for _ in range(rounds):  # interleaved, so drift and other load fall on both alike
        for mode, pending in (("idle", None), ("staged", staged)):
            counter.pending = pending
            samples[mode] += time_calls(counter.step, batches, 2.0)
    return {
        "idle_p50": statistics.median(samples["idle"]),
        "staged_p50": statistics.median(samples["staged"]),
        "batches": len(samples["idle"]),
    }


# --- 1 and 2 for the plugin ----------------------------------------------------------------------------


def plugin_commands(
    stub: pb_grpc.DynologStub, pid: int, out: str, n: int, rng: random.Random
) -> List[Command]:
    done: List[Command] = []
    for _ in range(n):
        time.sleep(0.05 + rng.uniform(0, STEP_MS / 1000))  # land anywhere in a step
        done.append(follow(stub, submit(lambda: stub.NpuTrace(npu_trace(pid, out, -1, 1), timeout=10))))
    return done


# --- 1 for stock Kineto --------------------------------------------------------------------------------


class Kineto(NamedTuple):
    """A stock Kineto process, its poll interval, and the tag its trace files are named by."""

    pid: int
    poll_s: float
    tag: str


def kineto_commands(
    stub: pb_grpc.DynologStub, kineto: Kineto, out: str, n: int, rng: random.Random
) -> List[Command]:
    pid, poll_s, tag = kineto
    done: List[Command] = []
    for i in range(n):
        # Kineto shows busy for a poll or so after its trace: wait until it is free, then pause a random
        # part of the poll interval, so the command lands at a random phase of Kineto's polling.
        wait_until(
            lambda: (process_info(stub, pid) or pb.ProcessInfo()).trace_state != pb.TRACE_STATE_RUNNING,
            timeout=3 * poll_s + 5,
            what="Kineto to be free",
        )
        time.sleep(rng.uniform(0, poll_s))
        request = pb.GpuTraceRequest(
            targets=pb.Targets(pids=[pid]),
            log_file=f"{out}/{tag}_{i}.json",  # a file per command: an old file must not pass for a new one
            iterations=1,
            duration_ms=500,
            profile_start_iteration_roundup=1,
        )
        call = functools.partial(stub.GpuTrace, request, timeout=10)
        done.append(follow(stub, submit(call, busy_for_s=2 * poll_s)))
    return done


def start_kineto(daemon: Daemon, config: Optional[Path]) -> Workload:
    env = {**daemon.client_env(), "KINETO_USE_DAEMON": "1"}
    if config is not None:
        env["KINETO_CONFIG"] = str(config)
    return Workload("train.py", env, ["--step-ms", str(STEP_MS)]).start()


# --- the run ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=20, help="nputrace commands to the plugin process")
    parser.add_argument(
        "--kineto-fast", type=int, default=5, help="gputrace commands, Kineto with a 1 s poll"
    )
    parser.add_argument("--kineto-default", type=int, default=3, help="gputrace commands, Kineto's 5 s poll")
    parser.add_argument("--steps", type=int, default=150, help="steps per step-time window")
    parser.add_argument("--cycles", type=int, default=4, help="staged windows (between idle ones)")
    parser.add_argument("--seed", type=int, help="for the random pauses (default: a fresh one each run)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    t_start = time.monotonic()
    boundary = boundary_cost_ns()

    with running_daemon() as daemon, tempfile.TemporaryDirectory(prefix="msmonitor-bench-trace-") as tmp:
        out = Path(tmp)
        steps_file, events_file = out / "steps.json", out / "events.json"
        with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
            stub = pb_grpc.DynologStub(channel)
            stub.GetStatus(pb.GetStatusRequest(), timeout=10)  # warm the channel

            # The plugin process: step windows first (a fresh process), then the commands.
            trainer = Workload(
                str(PROBE),
                daemon.plugin_env(),
                [str(events_file), "--step-ms", str(STEP_MS), "--report-steps", str(steps_file)],
            )
            try:
                trainer.start()
                wait_until(
                    lambda: (process_info(stub, trainer.pid) or pb.ProcessInfo()).backend == "torch",
                    what="the trainer to register",
                )
                windows = step_time_cycles(stub, trainer.pid, str(out / "staged"), args.steps, args.cycles)
                plugin = plugin_commands(stub, trainer.pid, str(out / "push"), args.commands, rng)
            finally:
                trainer.stop()
            steps = read_json(steps_file).get("steps", [])
            events = read_json(events_file)

            # Stock Kineto, 1 s and 5 s polls side by side (each command waits seconds; they do not interact).
            kinetos: List[Workload] = []
            try:
                with concurrent.futures.ThreadPoolExecutor(2) as pool:
                    started = pool.map(lambda c: start_kineto(daemon, c), [KINETO_1S_CONFIG, None])
                    kinetos = list(started)
                for job in kinetos:
                    wait_until(
                        lambda job=job: process_info(stub, job.pid), timeout=30, what="Kineto's first poll"
                    )
                with concurrent.futures.ThreadPoolExecutor(2) as pool:
                    fast_f = pool.submit(
                        kineto_commands,
                        stub,
                        Kineto(kinetos[0].pid, 1.0, "k1s"),
                        tmp,
                        args.kineto_fast,
                        random.Random(rng.random()),
                    )
                    slow_f = pool.submit(
                        kineto_commands,
                        stub,
                        Kineto(kinetos[1].pid, KINETO_DEFAULT_POLL_S, "k5s"),
                        tmp,
                        args.kineto_default,
                        random.Random(rng.random()),
                    )
                    fast, slow = fast_f.result(), slow_f.result()
            finally:
                for job in kinetos:
                    job.stop()

    measured = Measured(windows, plugin, steps, events, fast, slow, boundary, time.monotonic() - t_start)
    return summarize(args, measured)


@dataclass(frozen=True)
class Measured:
    """What a run measured, for :func:`summarize`."""

    windows: Dict[str, Any]  # step-time windows, idle and staged
    plugin: List[Command]  # the plugin's commands
    steps: List[Dict[str, float]]  # the trainer's steps
    events: Dict[str, Any]  # the probe's events in the process
    fast: List[Command]  # Kineto's, 1 s poll
    slow: List[Command]  # Kineto's, default 5 s poll
    boundary: Dict[str, float]  # step() in-process
    seconds: float  # the whole run


def summarize(args: argparse.Namespace, measured: Measured) -> int:
    windows, plugin, steps, events = measured.windows, measured.plugin, measured.steps, measured.events
    fast, slow, boundary, seconds = measured.fast, measured.slow, measured.boundary, measured.seconds
    inside = probe_times(events)
    probed = bool(events.get("probe")) and bool(inside)

    def in_process(c: Command, what: str) -> Optional[float]:
        t = inside.get(c.trace_id, {}).get(what)
        return None if t is None else t - c.sent

    ok = [c for c in plugin if c.final == "FINISHED"]
    # 1. delivery: in the process when the probe ran; else the daemon's READY (the plugin's report of it).
    took = [in_process(c, "accept") for c in ok] if probed else [c.since_sent("READY") for c in ok]
    delivery = spread(took)
    ready_daemon = spread([c.since_sent("READY") for c in ok])
    rpc = spread([c.replied - c.sent for c in ok])
    # 2. first recorded step and the written trace.
    running = spread([in_process(c, "RUNNING") if probed else c.since_sent("RUNNING") for c in ok])
    running_daemon = spread([c.since_sent("RUNNING") for c in ok])
    finished = spread([c.since_sent("FINISHED") for c in ok])
    # The step in which the profiler started: its work time, for the first trace and the later ones.
    starts = [
        boundary_work_ms(steps, inside.get(c.trace_id, {}).get("RUNNING", c.phases.get("RUNNING", 0)))
        for c in [*windows["staged"], *ok]
    ]
    first_start, later_starts = starts[0], stats_ms([s for s in starts[1:] if s is not None])

    # 3. step time: every window's work times, idle and staged (B ends before the profiler starts).
    n_win = args.steps
    idle_w = [work_ms(window_steps(steps, t0, t1, n_win)) for t0, t1 in windows["idle"]]
    staged_w = []
    for command in windows["staged"]:
        seen = inside.get(command.trace_id, {})
        ready_at = seen.get("READY", command.phases.get("READY", command.replied))
        running_at = seen.get("RUNNING", command.phases.get("RUNNING", float("inf")))
        staged_w.append(work_ms(window_steps(steps, ready_at, running_at, n_win, last=True)))
    idle_p50, idle_p90 = pooled(idle_w, 50), pooled(idle_w, 90)
    staged_p50, staged_p90 = pooled(staged_w, 50), pooled(staged_w, 90)
    effect_p50, effect_p90 = staged_p50 - idle_p50, staged_p90 - idle_p90
    # Two idle runs against each other: the even-numbered idle windows against the odd-numbered ones.
    noise_p50 = abs(pooled(idle_w[0::2], 50) - pooled(idle_w[1::2], 50))
    noise_p90 = abs(pooled(idle_w[0::2], 90) - pooled(idle_w[1::2], 90))
    chance_p50, chance_p90 = relabelled(idle_w, staged_w, 50), relabelled(idle_w, staged_w, 90)
    within = min(chance_p50, chance_p90) >= 0.05
    per_window = min(len(w) for w in idle_w + staged_w)

    # 1. Kineto.
    k1 = spread([x.since_sent("DELIVERED") for x in fast], 1.0)
    k5 = spread([x.since_sent("DELIVERED") for x in slow], 1.0)
    k1_done = spread([x.since_sent("FINISHED") for x in fast], 1.0)
    k5_done = spread([x.since_sent("FINISHED") for x in slow], 1.0)
    poll = KINETO_DEFAULT_POLL_S

    source = "in the process" if probed else "daemon's READY"
    n = len(ok)
    figures = [
        Figure(
            f"plugin (push): command → taken, {source}: p50",
            delivery["p50"],
            "ms",
            "<= 10",
            "≤ 5 s (next poll)",
        ),
        Figure("plugin (push): command → taken: p90", delivery["p90"], "ms", "", "—"),
        Figure("plugin (push): command → taken: max", delivery["max"], "ms", "", "—"),
        Figure("plugin: command → READY in the daemon: p50", ready_daemon["p50"], "ms", "", "—"),
        Figure("plugin: NpuTrace RPC round trip: p50", rpc["p50"], "ms", "", "—"),
        Figure(
            "plugin: --start-step -1 → first recorded step: p50", running["p50"], "ms", "", "7-12 s (Kineto)"
        ),
        Figure("plugin: --start-step -1 → first recorded step: p90", running["p90"], "ms", "", "—"),
        Figure("plugin: --start-step -1 → first recorded step: max", running["max"], "ms", "", "—"),
        Figure("plugin: --iterations 1 → FINISHED (written): p50", finished["p50"], "ms", "", "—"),
        Figure("Kineto, 1 s poll: command → delivered: p50", k1["p50"], "s", "", "same (poll)"),
        Figure("Kineto, 1 s poll: command → delivered: max", k1["max"], "s", "", "same"),
        Figure("Kineto, 5 s poll (default): command → delivered: p50", k5["p50"], "s", "", "same"),
        Figure("Kineto, 5 s poll (default): command → delivered: max", k5["max"], "s", "", "same"),
        Figure("Kineto, 5 s poll: expected p50 (computed)", poll / 2, "s", "", "same"),
        Figure("step work, idle: median", idle_p50, "ms", "", "—"),
        Figure("step work, trace staged: median", staged_p50, "ms", "", "—"),
        Figure("staged - idle: median", effect_p50 * 1000, "µs", "", "—"),
        Figure("noise: idle - idle (alternate windows): median", noise_p50 * 1000, "µs", "", "—"),
        Figure("staged - idle: p90", effect_p90 * 1000, "µs", "", "—"),
        Figure("noise: idle - idle (alternate windows): p90", noise_p90 * 1000, "µs", "", "—"),
        Figure("step() in-process, nothing pending: median", boundary["idle_p50"], "ns", "", "—"),
        Figure("step() in-process, trace staged: median", boundary["staged_p50"], "ns", "", "—"),
    ]
    failed = [c for c in plugin + fast + slow if c.final != "FINISHED"]
    notes = [
        f"plugin: {n} of {len(plugin)} commands finished; 'taken' is t_send → the plugin's tracer took the "
        f"pushed command ({'in the process' if probed else 'no probe: the daemon READY time instead'}); "
        f"the daemon saw READY on {ready_daemon['count']} of them (WatchTrace starts after the RPC returns "
        "and misses a READY that RUNNING already replaced).",
        "first recorded step: t_send → RUNNING reported, which is after the profiler started at the next "
        f"step boundary (≤ {STEP_MS:.0f} ms away); the daemon had RUNNING at p50 "
        f"{running_daemon['p50']:.1f} ms. FINISHED includes stopping the profiler and writing the trace.",
        f"profiler start, the step in which it happens: {first_start or float('nan'):.1f} ms of work for the "
        f"first trace in the process, p50 {later_starts['p50']:.1f} ms for later ones "
        f"(an idle step's work is {idle_p50:.2f} ms).",
        f"Kineto: {len(fast)} commands with a 1 s poll (KINETO_CONFIG), {len(slow)} with the default 5 s; "
        "a random pause of up to one interval before each; delivered = the daemon's DELIVERED time "
        f"(the poll that took it). Command → file seen: p50 {k1_done['p50']:.2f} s (1 s), "
        f"{k5_done['p50']:.2f} s (5 s), file looked for once a second. With a uniform poll phase the "
        f"delivery wait is uniform on [0, interval]: p50 {poll / 2:.1f} s, p90 {poll * 0.9:.1f} s, max "
        f"{poll:.0f} s for the default; the 1 s run scaled x5 gives p50 {k1['p50'] * poll:.2f} s.",
        f"step time: {len(idle_w)} idle and {len(staged_w)} staged windows, alternating, {per_window} steps "
        "each (at least), 20 ms padded steps; work time only (padding excluded; the plugin's step-boundary "
        "call runs inside the optimizer step, so in the work). Differences are of the pooled steps. "
        f"Relabelling the windows every possible way gives a difference as large {chance_p50:.0%} of the "
        f"time for the median, {chance_p90:.0%} for p90: "
        f"{'within the noise' if within else 'NOT within the noise (< 5 %)'}.",
        f"{len(failed)} command(s) did not finish: "
        + ("; ".join(f"{c.trace_id}: {c.final} {c.error}" for c in failed) or "none"),
        f"run time {seconds:.0f} s.",
    ]
    details = {
        "plugin": {
            "delivery_ms": delivery,
            "ready_in_daemon_ms": ready_daemon,
            "rpc_ms": rpc,
            "first_step_ms": running,
            "first_step_daemon_ms": running_daemon,
            "finished_ms": finished,
            "profiler_start_step_work_ms": {"first": first_start, "later": later_starts},
            "probe": probed,
            "commands": [{**asdict(c), "in_process": inside.get(c.trace_id, {})} for c in plugin],
        },
        "kineto": {
            "poll_1s": {"delivered_s": k1, "finished_s": k1_done, "commands": [asdict(x) for x in fast]},
            "poll_5s": {"delivered_s": k5, "finished_s": k5_done, "commands": [asdict(x) for x in slow]},
        },
        "step_boundary_ns": boundary,
        "step_time_ms": {
            "idle_windows": [stats_ms(w) for w in idle_w],
            "staged_windows": [stats_ms(w) for w in staged_w],
            "idle": {"p50": idle_p50, "p90": idle_p90},
            "staged": {"p50": staged_p50, "p90": staged_p90},
            "effect_p50": effect_p50,
            "effect_p90": effect_p90,
            "noise_p50": noise_p50,
            "noise_p90": noise_p90,
            "relabelled_as_large_p50": chance_p50,
            "relabelled_as_large_p90": chance_p90,
            "within_noise": within,
            "staged_traces": [c.trace_id for c in windows["staged"]],
        },
    }
    report("trace", figures, notes, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
