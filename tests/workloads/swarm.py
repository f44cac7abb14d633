"""A swarm of N simulated plugin processes against one real daemon, and the soak that drives it.

Run as a script, this is the simulator: one parent that imports the plugin once, then forks N children
(copy-on-write: ``gc.freeze()`` first, so the children's garbage collector does not write to the
inherited heap; each child still costs ~3.3 MB of private memory). Each child is a real process with
its own pid, alive in ``/proc`` while it runs, and it sends its own datagrams from its own socket, so
the kernel-verified sender pid (``SO_PASSCRED``) the daemon keys its registry by is that child's. One
process holding many sockets could not do this: the kernel stamps a datagram with the pid of the
process that sends it, and claiming another pid needs ``CAP_SYS_ADMIN`` — not what real jobs do.

What a child sends is built by the plugin's own code: its registration by ``identity.hello()`` (looked
up once; step, trace and monitor state filled in at each heartbeat), every message by the ``wire``
classes and encoder, reports by the monitor's ``Aggregator`` and ``Report.to_chunks()``; commands are
parsed and answered by the plugin's ``CommandRouter``, its ``Tracer`` (``mm.event`` ready, running,
finished, with a trace file written) and its ``configtext``/``MonitorConfig`` (``mm.monitor``). Only
what a real process measures is synthetic: the monitor's records (:class:`SyntheticBackend`) and the
trace's content (:class:`SyntheticRecorder`).

Where it departs from the plugin, and why — a thousand Python processes on two cores, each costing
~75 µs per wake-up on this machine, must wake as little as possible (measured: the plugin's own Agent,
three threads, costs 1.6 ms of CPU a second per process; this, ~0.5 ms):

* one thread, not the plugin's three: :class:`Link` follows the DaemonLink's rules with its constants
  (heartbeat, refused hello = unregistered and retried with back-off, a queue of 32 for reports and
  answers retried only while registered, ``mm.bye`` tried once), and commands are handled in the same
  loop as soon as they arrive;
* the hellos keep a fixed phase, and a step and (by default) the interval's report ride on the same
  wake-up; so reports are spread over the second, each process at its own phase, instead of every
  process reporting at the same instant after one ``dyno npu-monitor`` (``--reports-in-phase`` does
  that, as the plugin does);
* ``--heartbeat-s`` sets the heartbeat (the plugin derives it from the keep-alive: every 5 s with the
  daemon's default 60 s);
* the processes (not their parent) run at ``--nice`` 10: on a node they have cores of their own, here
  they would otherwise queue the daemon behind them. (Not pinned off one CPU: a thousand processes on
  the other, with the machine's other work, queued for minutes.)

Protocol with whoever starts the script (stdout lines; stdin commands):

* ``ready pid=P processes=N pids=a,b,...`` once every child has registered (had its ``mm.ack``).
* stdin ``measure``: answered with ``measured {json}`` — the children's CPU seconds and memory (PSS).
* stdin closed: the children are stopped (SIGTERM, 100 every 0.1 s, so a thousand goodbyes do not
  arrive at once); each leaves as the plugin does at exit, then reports what its socket sent, what the
  kernel refused and what it gave up; the script prints ``done {json}`` with the totals and exits.

Each child dies with the parent (``PR_SET_PDEATHSIG``; the parent too, with ``--die-with-parent``), and
all share the parent's process group, so a caller that kills the group leaves nothing behind.

Imported (by ``tests/test_soak.py`` and ``benchmarks/soak.py``), this module is the soak's driver:
:func:`run_soak` starts the swarm against a daemon, sends ``dyno`` commands every few seconds through
the real CLI, samples the daemon's memory and CPU from ``/proc``, and accounts for every datagram.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import dataclasses
import errno
import gc
import itertools
import json
import os
import random
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import (
    Any,
    Callable,
    Counter,
    Deque,
    Dict,
    FrozenSet,
    Iterator,
    List,
    Optional,
    Set,
    Tuple,
)

from msmonitor_contract import configtext, wire
from msmonitor_contract.activity import Kind
from msmonitor_contract.vocabulary import DEFAULT_REPORT_INTERVAL_S, CommandKind, MonitorState, timestamp
from msmonitor_plugin import identity
from msmonitor_plugin.agent import capabilities
from msmonitor_plugin.kinds.base import TraceSpec
from msmonitor_plugin.link import (
    ABSENT_RETRY_S,
    MAX_HEARTBEAT_S,
    MIN_HEARTBEAT_S,
    UNSENT_RETRY_S,
    Backoff,
    jittered,
)
from msmonitor_plugin.monitor.aggregate import Aggregator, Row
from msmonitor_plugin.monitor.backends import Collector
from msmonitor_plugin.monitor.config import ConfigError, MonitorConfig
from msmonitor_plugin.router import CommandRouter
from msmonitor_plugin.steps import StepCounter
from msmonitor_plugin.trace.tracer import Tracer

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:  # run as a script: the harness lives one folder up
    sys.path.insert(0, str(TESTS))

from harness import Daemon, cpu_seconds, read_line_until, stop_process, wait_until  # noqa: E402

SCRIPT = Path(__file__).resolve()
JOB_BASE = 7000  # job ids JOB_BASE .. JOB_BASE + jobs - 1
DEVICES_PER_NODE = 8
NAMES_PER_KIND = 20  # distinct names a kind sees each interval; the top N of them are reported
HOST_KINDS = frozenset({Kind.MARKER, Kind.API, Kind.ACL_API, Kind.NODE_API, Kind.RUNTIME_API})
PR_SET_PDEATHSIG = 1
COALESCE_S = 0.02  # timers due this soon are served in the wake-up at hand
STOP_BATCH = 100  # children stopped per STOP_PAUSE_S
STOP_PAUSE_S = 0.1
STOP_GRACE_S = 30.0  # then the rest are killed


# --- what a simulated process measures -----------------------------------------------------------------


class SyntheticBackend:
    """Stands in for MSPTI: at each report, rows for every requested kind (NAMES_PER_KIND names each), as
    the MSPTI backend merges a buffer's records into the interval's Aggregator."""

    name = "synthetic"

    def __init__(self, device: int, seed: int) -> None:
        self._device = device
        self._rng = random.Random(seed)
        self._kinds: FrozenSet[Kind] = frozenset()
        self._rows: List[Row] = []
        self._collector: Optional[Collector] = None

    def start(self, collector: Collector, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        self._collector = collector
        return self.set_kinds(kinds)

    def set_kinds(self, kinds: FrozenSet[Kind]) -> Dict[Kind, str]:
        if kinds != self._kinds:
            self._kinds = kinds
            self._rows = [self._row(kind, i) for kind in sorted(kinds) for i in range(NAMES_PER_KIND)]
        return {}

    def _row(self, kind: Kind, i: int) -> Row:
        device = -1 if kind in HOST_KINDS else self._device
        key: Any = ("torch", f"step/layer_{i}") if kind is Kind.MARKER else f"{kind.label}_op_{i}"
        count, mean = self._rng.randint(1, 200), self._rng.randint(1_000, 500_000)
        return (kind, device, key, count, count * mean, mean // 2, mean * 2)

    def flush(self) -> None:
        if self._collector is None:
            return
        scale = self._rng.uniform(0.5, 1.5)  # one draw per interval: the names' rows are made once
        self._collector.add_rows(
            [
                (k, d, key, max(1, int(c * scale)), int(t * scale), mn, mx)
                for k, d, key, c, t, mn, mx in self._rows
            ]
        )


class SyntheticRecorder:
    """Stands in for torch.profiler: records nothing, writes a small Chrome trace where nputrace puts one."""

    backend = "synthetic"

    def __init__(self, spec: TraceSpec) -> None:
        self.spec = spec
        self.warnings: List[str] = []
        host, pid = socket.gethostname(), os.getpid()
        stamp = timestamp(int(time.time() * 1000))
        self._dir = os.path.join(spec.log_file, f"{host}_{pid}_{stamp}_{self.backend}")
        self._file = os.path.join(self._dir, f"{host}_{pid}.pt.trace.json")
        self._steps: List[int] = []

    @property
    def output(self) -> str:
        return self._dir

    def start(self, first_step: int) -> None:
        self._steps = [first_step]

    def step(self) -> None:
        self._steps.append(self._steps[-1] + 1)

    def stop(self) -> None:
        pass

    def write(self) -> List[str]:
        os.makedirs(self._dir, exist_ok=True)
        events = [
            {"name": f"ProfilerStep#{s}", "ph": "X", "ts": i * 500_000, "dur": 500_000, "pid": os.getpid()}
            for i, s in enumerate(self._steps)
        ]
        with open(self._file, "w") as f:
            json.dump({"traceEvents": events}, f)
        return [self._file]

    def add_file(self, name: str, text: str) -> str:
        path = os.path.join(self._dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def close(self) -> None:
        pass  # holds no folder open


def _type_of(data: bytes) -> str:
    return bytes(data[8 : wire.HEADER_SIZE]).split(b"\0", 1)[0].decode("ascii", "replace")


# --- one simulated process (a forked child) --------------------------------------------------------------


class SimulatedMonitor:
    """npu-monitor as the plugin runs it, on the caller's thread instead of a monitor thread of its own.

    Commands are parsed by the plugin's own ``configtext`` and ``MonitorConfig`` and answered as its
    ``MonitorHandler`` answers (``mm.monitor`` with the state, the backend, the unavailable kinds); each
    interval's records go through the plugin's ``Aggregator`` and leave as ``Report.to_chunks()`` chunks
    (``mm.metrics``); a stop sends the final report first, as the engine's teardown does.

    The plugin's monitor reports every interval from the command that started it, so one command puts
    every process's reports in phase. *in_phase* keeps that; otherwise (the soak's default) a report is
    taken at the process's own step once it is due, so reports are spread over the interval as those of
    processes started at different times are, and cost the process no wake-up of their own.
    """

    def __init__(self, send: Callable[[str, bytes], None], device: int, in_phase: bool) -> None:
        self._send = send
        self.in_phase = in_phase
        self._backend = SyntheticBackend(device, os.getpid())
        self._aggregator = Aggregator()
        self._collector = Collector(self._aggregator)
        self.running = False
        self.interval_s = DEFAULT_REPORT_INTERVAL_S
        self.next_report = float("inf")
        self._interval_start_ns = 0
        self._seq = 0

    @property
    def state(self) -> MonitorState:
        return MonitorState.RUNNING if self.running else MonitorState.IDLE

    def handle(self, command: wire.Command) -> None:
        try:
            config = MonitorConfig.parse(configtext.parse(command.config))
        except (configtext.ConfigTextError, ConfigError) as exc:
            return self._answer(wire.MonitorEvent(command.trace_id, self.state.value, error=str(exc)))
        if config.stop and self.running:
            self._report(final=True)
            self.running = False
            self.next_report = float("inf")
        if config.report_interval_s > 0:
            if self.running:
                self.next_report += config.report_interval_s - self.interval_s
            self.interval_s = config.report_interval_s
        if config.start and not self.running:
            self.running = True
            self._backend.start(self._collector, config.kinds)
            self._interval_start_ns = time.time_ns()
            self.next_report = time.monotonic() + self.interval_s
        if self.running:
            self._aggregator.top_n = config.top_n
            self._backend.set_kinds(config.kinds)
        backend = self._backend.name if self.running else ""
        self._answer(
            wire.MonitorEvent(command.trace_id, self.state.value, backend, warnings=list(config.warnings))
        )

    def due(self) -> float:
        """When the process must wake for a report (never, when reports ride on its steps)."""
        return self.next_report if self.in_phase else float("inf")

    def tick(self, now: float) -> None:
        """The interval's report, when it is due."""
        if self.running and now >= self.next_report:
            self._report(final=False)
            self.next_report = max(self.next_report + self.interval_s, now)

    def close(self) -> None:
        """The process exits: the final report, then the answer that says the monitor stopped."""
        if not self.running:
            return
        self._report(final=True)
        self.running = False
        self._answer(wire.MonitorEvent("", MonitorState.IDLE.value, reason="closed"))

    def _report(self, final: bool) -> None:
        self._backend.flush()
        end_ns = time.time_ns()
        self._seq += 1
        report = self._aggregator.take(
            seq=self._seq,
            pid=os.getpid(),
            backend=self._backend.name,
            start_ns=self._interval_start_ns,
            end_ns=end_ns,
            sampled_ns=None,
            unavailable={},
            final=final,
        )
        self._interval_start_ns = end_ns
        for chunk in report.to_chunks():
            self._send(wire.METRICS, chunk)

    def _answer(self, event: wire.MonitorEvent) -> None:
        self._send(wire.MONITOR, event.to_payload())


class Link:
    """The plugin's DaemonLink, by its own rules and constants, on the process's one thread.

    Registration is ``mm.hello``, repeated every third of the keep-alive the ``mm.ack`` gives (within
    MIN/MAX_HEARTBEAT_S); a hello the kernel refuses (the daemon away, or its queue full) marks the
    process unregistered and is retried after ABSENT_RETRY_S, doubling, jittered (the link's Backoff).
    Reports, answers and trace events that cannot go at once wait (at most 32, oldest dropped) and are
    retried after UNSENT_RETRY_S, doubling, jittered, but only while registered. ``mm.bye`` at the end
    is tried once. Hellos keep a fixed phase (due every heartbeat from the first, not from each send),
    so that a training step falls in the same wake-up: a thousand processes on two cores cannot each
    wake for everything separately.
    """

    def __init__(
        self, socket_dir: str, make_hello: Callable[[], wire.Hello], heartbeat_s: float = 0.0
    ) -> None:
        self.daemon = wire.endpoint_address(wire.DAEMON_ENDPOINT, socket_dir)
        self.address = wire.endpoint_address(f"msmonitor-{os.getpid()}-{uuid.uuid4().hex[:12]}", socket_dir)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.setblocking(False)
        self.sock.bind(self.address)
        if isinstance(self.address, str):
            os.chmod(self.address, 0o600)
        self.make_hello = make_hello
        self.registered = False
        self.heartbeat_s = heartbeat_s or MAX_HEARTBEAT_S
        self._fixed_heartbeat = heartbeat_s > 0  # else a third of the keep-alive, as the plugin's link
        self.next_hello = time.monotonic()
        self._hello_phase = self.next_hello  # when the last hello was due
        self._unsent: Deque[bytes] = collections.deque(maxlen=32)
        self._unsent_retry = UNSENT_RETRY_S[0]
        self._rng = random.Random()
        self._absent = Backoff(ABSENT_RETRY_S, self._rng)
        self.next_flush = float("inf")
        self.registrations = 0  # mm.ack after being unregistered (the first, and after refused hellos)
        self.keepalive_s = 0.0
        self._last_hello = 0.0  # when the kernel last took a hello
        self.longest_silence = 0.0  # the longest time between two hellos the kernel took
        self.sent: Counter[str] = collections.Counter()  # datagrams the kernel took, by type
        self.received: Counter[str] = collections.Counter()
        self.refused: Counter[str] = collections.Counter()  # sends the kernel refused (queue full), by type
        self.lost: Counter[str] = (
            collections.Counter()
        )  # never sent: pushed out of the waiting queue, or at exit
        # A trace is written on a thread of its own, which sends its outcome: counts and the queue are
        # shared with it, and it wakes the main thread when its send must be retried.
        self._lock = threading.Lock()
        self.wake_r, self.wake_w = socket.socketpair()
        for end in (self.wake_r, self.wake_w):
            end.setblocking(False)

    def send(self, msg_type: str, payload: bytes = b"") -> bool:
        with self._lock:
            try:
                self.sock.sendto(wire.encode(msg_type, payload), self.daemon)
            except OSError:
                self.refused[msg_type] += 1
                return False
            self.sent[msg_type] += 1
            return True

    def send_reliably(self, msg_type: str, payload: bytes) -> None:
        if not self.send(msg_type, payload):
            with self._lock:
                if len(self._unsent) == self._unsent.maxlen:
                    self.lost[_type_of(self._unsent[0])] += 1
                self._unsent.append(wire.encode(msg_type, payload))
                self.next_flush = min(
                    self.next_flush, time.monotonic() + jittered(self._unsent_retry, self._rng)
                )
            if threading.current_thread() is not threading.main_thread():
                with contextlib.suppress(OSError):
                    self.wake_w.send(b"x")

    def due(self) -> float:
        return min(self.next_hello, self.next_flush)

    def poll(self, now: float) -> None:
        """The heartbeat and the retries that are due by *now*."""
        if now + COALESCE_S >= self.next_hello:
            if self.send(wire.HELLO, self.make_hello().to_payload()):
                if self._last_hello:
                    self.longest_silence = max(self.longest_silence, now - self._last_hello)
                self._last_hello = now
                self._absent.reset()
                self._hello_phase = max(self.next_hello, now - self.heartbeat_s)
                self.next_hello = self._hello_phase + self.heartbeat_s
            else:
                self.registered = False
                self.next_hello = now + self._absent.next()
        if now >= self.next_flush:
            self._flush(now)

    def _flush(self, now: float) -> None:
        with self._lock:
            self._flush_locked(now)

    def _flush_locked(self, now: float) -> None:
        while self._unsent and self.registered:
            data = self._unsent[0]
            try:
                self.sock.sendto(data, self.daemon)
            except OSError as exc:
                self.refused[_type_of(data)] += 1
                if exc.errno != errno.EAGAIN:  # gone, not just busy: register again first
                    self.registered = False
                break
            self.sent[_type_of(data)] += 1
            self._unsent.popleft()
        if not self._unsent:
            self._unsent_retry, self.next_flush = UNSENT_RETRY_S[0], float("inf")
        elif self.registered:
            self._unsent_retry = min(self._unsent_retry * 2, UNSENT_RETRY_S[1])
            self.next_flush = now + jittered(self._unsent_retry, self._rng)
        else:
            self.next_flush = float("inf")  # until the next mm.ack

    def receive(self) -> Iterator[wire.Datagram]:
        """What the daemon sent; the acks are handled here, the rest (commands) yielded."""
        while True:
            try:
                data = wire.receive_from(self.sock, self.daemon)
            except (BlockingIOError, InterruptedError):
                return
            if data is None:
                continue
            try:
                datagram = wire.decode(data)
            except wire.WireError:
                continue
            self.received[datagram.type] += 1
            if datagram.type != wire.ACK:
                yield datagram
                continue
            ack = wire.Ack.from_payload(datagram.payload)
            self.keepalive_s = ack.keepalive_s
            if not self._fixed_heartbeat:
                self.heartbeat_s = min(MAX_HEARTBEAT_S, max(MIN_HEARTBEAT_S, ack.keepalive_s / 3))
            self.next_hello = min(self.next_hello, self._hello_phase + self.heartbeat_s)
            self.registrations += not self.registered
            self.registered = True
            self._flush(time.monotonic())

    def stop(self) -> None:
        self.send(wire.BYE, wire.Bye(pid=os.getpid()).to_payload())
        with self._lock:
            self.lost.update(_type_of(data) for data in self._unsent)
        for s in (self.sock, self.wake_r, self.wake_w):
            s.close()
        if isinstance(self.address, str):
            with contextlib.suppress(OSError):
                os.unlink(self.address)


class SimulatedProcess:
    """One plugin process: its link, step counter, command router and tracer, wired as the plugin's Agent
    wires them, and a :class:`SimulatedMonitor`, all on one thread that also steps, as a training loop."""

    def __init__(self, index: int, args: argparse.Namespace, status_fd: int) -> None:
        per_job = max(1, -(-args.processes // args.jobs))
        rank = index % per_job
        self.env = {
            "KINETO_IPC_SOCKET_DIR": args.socket_dir,
            "MSMONITOR_JOB_ID": str(JOB_BASE + index // per_job),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank % DEVICES_PER_NODE),
            "WORLD_SIZE": str(per_job),
            "ASCEND_RT_VISIBLE_DEVICES": ",".join(str(d) for d in range(DEVICES_PER_NODE)),
        }
        self.step_s = args.step_s
        self.status_fd = status_fd
        self.stopping = False
        self.counter = StepCounter()
        self.link = Link(args.socket_dir, self._hello, args.heartbeat_s)
        self.tracer = Tracer(self.counter, self._trace_event, SyntheticRecorder)
        self.monitor = SimulatedMonitor(
            self.link.send_reliably, rank % DEVICES_PER_NODE, args.reports_in_phase
        )
        self.router = CommandRouter()
        self.router.register(
            (CommandKind.NPUTRACE, CommandKind.GPUTRACE, CommandKind.DYNAMIC), self.tracer.accept
        )
        self.router.register((CommandKind.NPUMONITOR,), self.monitor.handle)
        # What identity.hello() finds (ancestors, versions, host) does not change while the process runs:
        # looked up once, the fields that do change are filled in at each heartbeat.
        self._identity = identity.hello(0, capabilities(self.router.kinds, self.env), self.env)

    def _hello(self) -> wire.Hello:
        trace_id, phase = self.tracer.state()
        return dataclasses.replace(
            self._identity,
            step=self.counter.count,
            trace_id=trace_id,
            trace_phase=phase,
            monitor_state=self.monitor.state.value,
        )

    def _trace_event(self, event: wire.TraceEvent) -> None:
        self.link.send_reliably(wire.EVENT, event.to_payload())

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.set_wakeup_fd(self.link.wake_w.fileno())  # a stop ends the wait at once
        told = False
        # A step with every heartbeat (both every second): one wake-up, not two.
        next_step = self.link.next_hello
        while not self.stopping:
            now = time.monotonic()
            if now + COALESCE_S >= next_step:
                self.counter.step()
                next_step += self.step_s
                self.monitor.tick(now + COALESCE_S)
            elif self.monitor.in_phase:
                self.monitor.tick(now)
            self.link.poll(now)
            wake = min(next_step, self.monitor.due(), self.link.due())
            ready = select.select(
                [self.link.sock, self.link.wake_r], [], [], max(0.0, wake - time.monotonic())
            )[0]
            if self.link.wake_r in ready:
                with contextlib.suppress(OSError):
                    self.link.wake_r.recv(64)
            if self.link.sock in ready:
                for datagram in self.link.receive():
                    if datagram.type == wire.COMMAND:
                        self.router.route(wire.Command.from_payload(datagram.payload))
            if not told and self.link.registered:
                told = True
                self._tell(f"R {os.getpid()}")
        # What the plugin does at exit: the trace aborted, the monitor closed, mm.bye.
        self.tracer.abort(f"the process exited at step {self.counter.count}")
        self.monitor.close()
        self.link.poll(time.monotonic())  # one last try for what waits
        self.link.stop()  # what still waits is lost, as in the plugin
        stats = {
            "sent": dict(self.link.sent),
            "received": dict(self.link.received),
            "refused": dict(self.link.refused),
            "lost": dict(self.link.lost),
            "registrations": self.link.registrations,
            "longest_silence": self.link.longest_silence,
            "silent_past_keepalive": self.link.longest_silence > self.link.keepalive_s > 0,
        }
        self._tell(f"S {os.getpid()} {json.dumps(stats, separators=(',', ':'))}")

    def _on_term(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def _tell(self, line: str) -> None:
        os.write(self.status_fd, (line + "\n").encode())  # < PIPE_BUF: one atomic write


# --- the simulator's parent ---------------------------------------------------------------------------


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _cpu_s(pid: int) -> float:
    """Seconds on CPU of all of *pid*'s threads (schedstat: nanoseconds, not clock ticks; a process that
    runs a few hundred microseconds a second is mostly missed by tick sampling)."""
    total = 0
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
    return total / 1e9


class Parent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.children: Dict[int, int] = {}  # pid -> index
        self.registered: List[int] = []
        self.stats: Dict[int, Dict[str, Any]] = {}
        self.exits: Dict[int, int] = {}  # pid -> wait status
        self.died_early: List[int] = []
        self.stopping_since = 0.0
        self.signalled: Set[int] = set()

    def spawn(self) -> int:
        """Fork the children; returns the read end of the pipe they report on."""
        status_r, status_w = os.pipe()
        libc = ctypes.CDLL(None, use_errno=True)
        me = os.getpid()
        gc.collect()
        gc.freeze()  # the children's collector must not touch (and so copy) the inherited heap
        pause = 1.0 / self.args.spawn_per_s
        for index in range(self.args.processes):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.close(status_r)
                    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                    if os.getppid() != me:  # the parent died before prctl took effect
                        os._exit(1)
                    # A node spreads its processes over many cores; here a thousand share two with the
                    # daemon, which would otherwise wait behind them. Not SCHED_IDLE: other work on the
                    # machine would then starve them into silence. Not the parent: it answers `measure`
                    # (two thousand /proc reads), which at nice 10 on a busy machine once outlasted the
                    # test's minute.
                    os.nice(self.args.nice)
                    SimulatedProcess(index, self.args, status_w).run()
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            self.children[pid] = index
            time.sleep(pause)
        os.close(status_w)
        return status_r

    def run(self) -> int:
        status_r = self.spawn()
        reader = _Lines(status_r)
        stdin = _Lines(sys.stdin.fileno())
        announced = False
        while True:
            fds = [status_r] + ([] if stdin.eof else [stdin.fd])
            readable, _, _ = select.select(fds, [], [], 0.2)
            if status_r in readable:
                for line in reader.read():
                    self._on_status(line)
                if reader.eof:
                    break
            if stdin.fd in readable:
                for line in stdin.read():
                    if line.strip() == "measure":
                        _say("measured " + json.dumps(self.measure()))
                if stdin.eof:
                    self.stopping_since = time.monotonic()
            if not announced and len(self.registered) == len(self.children):
                announced = True
                pids = ",".join(str(p) for p in sorted(self.children))
                _say(f"ready pid={os.getpid()} processes={len(self.children)} pids={pids}")
            self._reap()
            if self.stopping_since:
                self._stop_some()
        self._reap(block=True)
        _say("done " + json.dumps(self.summary()))
        return 0

    def _on_status(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "R":
            self.registered.append(int(rest))
        elif kind == "S":
            pid, _, payload = rest.partition(" ")
            self.stats[int(pid)] = json.loads(payload)

    def _reap(self, block: bool = False) -> None:
        while len(self.exits) < len(self.children):
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exits[pid] = status
            if not self.stopping_since:
                self.died_early.append(pid)
                _say(f"died pid={pid} status={status}")

    def _stop_some(self) -> None:
        """SIGTERM the next batch; after STOP_GRACE_S, SIGKILL whoever is left."""
        elapsed = time.monotonic() - self.stopping_since
        late = elapsed > STOP_GRACE_S
        due = len(self.children) if late else int(elapsed / STOP_PAUSE_S + 1) * STOP_BATCH
        for pid in list(self.children)[:due]:
            if pid in self.exits or (pid in self.signalled and not late):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
            self.signalled.add(pid)

    def measure(self) -> Dict[str, Any]:
        alive = [p for p in self.children if p not in self.exits]
        return {
            "alive": len(alive),
            "cpu_s": sum(_cpu_s(p) for p in alive),
            "pss_kib": sum(_pss_kib(p) for p in alive) + _pss_kib(os.getpid()),
            "at": time.monotonic(),
        }

    def summary(self) -> Dict[str, Any]:
        sent: Counter[str] = collections.Counter()
        received: Counter[str] = collections.Counter()
        refused: Counter[str] = collections.Counter()
        lost: Counter[str] = collections.Counter()
        registrations = silent = 0
        longest = 0.0
        for s in self.stats.values():
            silent += s["silent_past_keepalive"]
            longest = max(longest, s["longest_silence"])
            sent.update(s["sent"])
            received.update(s["received"])
            refused.update(s["refused"])
            lost.update(s["lost"])
            registrations += s["registrations"]
        clean = sum(1 for st in self.exits.values() if os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0)
        times = os.times()
        return {
            "processes": len(self.children),
            "registered": len(self.registered),
            "reported": len(self.stats),
            "exited_cleanly": clean,
            "died_early": len(self.died_early),
            "sent": dict(sent),
            "sent_total": sum(sent.values()),
            "received": dict(received),
            "refused": dict(refused),  # attempts the kernel refused (the daemon's queue full); retried
            "lost": dict(lost),  # given up: the link's queue of 32 overflowed, or still queued at exit
            "registrations": registrations,
            # Processes whose hellos the kernel refused for longer than the daemon's keep-alive: the
            # daemon may rightly forget them.
            "silent_past_keepalive": silent,
            "longest_silence_s": longest,
            "children_cpu_s": times.children_user + times.children_system,
        }


class _Lines:
    """Whole lines from a file descriptor, read without blocking past what select() said is there."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.eof = fd, b"", False

    def read(self) -> List[str]:
        chunk = os.read(self.fd, 65536)
        self.eof = not chunk
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [line.decode() for line in lines]


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--socket-dir", required=True, help="the daemon's --ipc-socket-dir")
    parser.add_argument("--jobs", type=int, default=10, help="processes are split into this many jobs")
    parser.add_argument("--step-s", type=float, default=1.0, help="seconds per training step")
    parser.add_argument("--spawn-per-s", type=float, default=500.0, help="children forked per second")
    parser.add_argument(
        "--reports-in-phase",
        action="store_true",
        help="report every interval from the start command, as the plugin does (default: at each "
        "process's own step, spread over the interval)",
    )
    parser.add_argument(
        "--die-with-parent", action="store_true", help="exit when whoever started the simulator does"
    )
    parser.add_argument("--nice", type=int, default=10, help="niceness of the simulated processes")
    parser.add_argument(
        "--heartbeat-s",
        type=float,
        default=0.0,
        help="seconds between hellos (default 0: a third of the daemon's keep-alive, as the plugin)",
    )
    args = parser.parse_args(argv)
    if args.die_with_parent:  # the children die with this process in turn: nothing is left behind
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:
            return 1
    return Parent(args).run()


# --- the driver: a soak of one daemon -----------------------------------------------------------------


@dataclass
class SoakConfig:
    processes: int = 1000
    duration_s: float = 600.0  # from the first npu-monitor start to the final checks
    warmup_s: float = 60.0  # memory and CPU are measured from here on
    command_every_s: float = 3.0
    jobs: int = 10
    # The daemon's default keep-alive. The plugin would heartbeat at 5 s with it (a third, at most 5 s);
    # the soak's processes heartbeat every second instead, as many hellos as with a 3 s keep-alive.
    keepalive_s: float = 60.0
    heartbeat_s: float = 1.0
    report_interval_s: int = 1
    step_s: float = 1.0  # one training step
    kinds: str = "Marker,Kernel,API,Communication"
    command_timeout_s: float = 30.0  # dyno's own gRPC deadline is 10 s; this only catches a hung CLI
    reports_in_phase: bool = False  # see SimulatedMonitor
    nice: int = 10  # see Parent.spawn

    def plan_cycle_s(self) -> float:
        """How long until every job has had each command of the plan once."""
        return self.jobs * COMMANDS_PER_JOB * self.command_every_s

    def daemon_args(self) -> List[str]:
        return ["--process-keepalive-s", f"{self.keepalive_s:g}"]


@dataclass
class CommandRun:
    name: str
    args: List[str]
    at_s: float  # since the soak began
    seconds: float
    returncode: Optional[int]  # None: timed out
    answered: bool  # the CLI returned the daemon's answer
    effective: Optional[bool] = None  # commands: commandStatus
    matched: int = 0
    triggered: int = 0
    unanswered_processes: int = 0  # npu-monitor: pushed, no answer from the process within the wait
    finished: int = 0  # trace: processes whose trace finished
    registered: int = -1  # status / processes: processes the daemon lists
    trace_id: str = ""  # nputrace: the trace it started
    error: str = ""


@dataclass
class SoakResult:
    config: SoakConfig
    pids: List[int] = field(default_factory=list)
    ramp_s: float = 0.0  # start of the swarm until every process registered
    measured_s: float = 0.0
    rss_kib: List[Tuple[float, int]] = field(default_factory=list)  # (seconds since the soak began, VmRSS)
    rss_kib_ready: int = 0
    rss_kib_warm: int = 0
    rss_kib_end: int = 0
    rss_kib_peak: int = 0  # after warm-up
    rss_kib_after_leave: int = 0
    cpu_pct: float = 0.0  # daemon, measured window
    cpu_pct_whole: float = 0.0  # daemon, from the first command to the end
    # The daemon's event loop runnable but waiting for a CPU, % of the measured window (schedstat
    # run_delay): what the other work on the machine, the simulated processes included, took from it.
    wait_pct: float = 0.0
    swarm_cpu_pct: float = 0.0  # all simulated processes, measured window
    swarm_pss_kib: int = 0
    commands: List[CommandRun] = field(default_factory=list)
    registry_at_end: int = 0
    missing_at_end: List[int] = field(default_factory=list)
    registry_min_seen: int = -1  # the fewest processes any status/processes call listed after ramp-up
    forgotten: int = 0  # times the daemon forgot one of the processes while it ran (its log says so)
    registry_after_leave: int = -1
    ipc: Dict[str, int] = field(default_factory=dict)  # the daemon's counters once everything was read
    dropped: Dict[str, int] = field(default_factory=dict)
    swarm: Dict[str, Any] = field(default_factory=dict)  # the simulator's summary

    @property
    def rss_growth_kib(self) -> int:
        return self.rss_kib_end - self.rss_kib_warm

    def rss_slope_kib_per_min(self) -> float:
        """Least-squares slope of VmRSS after warm-up: a leak shows as a steady climb, noise does not."""
        points = [(t, r) for t, r in self.rss_kib if t >= self.config.warmup_s]
        if len(points) < 3:
            return float("nan")
        mt = statistics.fmean(t for t, _ in points)
        mr = statistics.fmean(r for _, r in points)
        den = sum((t - mt) ** 2 for t, _ in points)
        return 60 * sum((t - mt) * (r - mr) for t, r in points) / den if den else float("nan")

    @property
    def sent_total(self) -> int:
        return int(self.swarm.get("sent_total", -1))

    @property
    def unaccounted_sent(self) -> int:
        """Datagrams the processes' sockets handed to the kernel that the daemon never read."""
        return self.sent_total - self.ipc.get("received", 0)

    @property
    def unaccounted_read(self) -> Optional[int]:
        """Datagrams read that ended in none of handled, malformed, rejected (None: no ``handled`` yet)."""
        if "handled" not in self.ipc:
            return None
        c = self.ipc
        return c["received"] - c["handled"] - c["malformed"] - c["rejected_senders"]

    @property
    def unanswered(self) -> List[CommandRun]:
        return [c for c in self.commands if not c.answered]

    def to_dict(self) -> Dict[str, Any]:
        out = asdict(self)
        out.update(
            rss_growth_kib=self.rss_growth_kib,
            rss_slope_kib_per_min=self.rss_slope_kib_per_min(),
            sent_total=self.sent_total,
            unaccounted_sent=self.unaccounted_sent,
            unaccounted_read=self.unaccounted_read,
        )
        return out


class Swarm:
    """The simulator as a child process in a process group of its own; :meth:`kill` ends all of it."""

    def __init__(self, daemon: Daemon, cfg: SoakConfig, log: Path) -> None:
        self.daemon, self.cfg, self.log = daemon, cfg, log
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
        self.pids: List[int] = []

    def start(self) -> Swarm:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MSMONITOR_", "KINETO_"))}
        cmd = [
            sys.executable,
            str(SCRIPT),
            "--processes",
            str(self.cfg.processes),
            "--socket-dir",
            str(self.daemon.socket_dir),
            "--jobs",
            str(self.cfg.jobs),
            "--step-s",
            str(self.cfg.step_s),
            "--die-with-parent",
            "--nice",
            str(self.cfg.nice),
            "--heartbeat-s",
            f"{self.cfg.heartbeat_s:g}",
            *(["--reports-in-phase"] if self.cfg.reports_in_phase else []),
        ]
        with open(self.log, "ab") as log:  # children's tracebacks; never a pipe nobody reads
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                text=True,
                start_new_session=True,
            )
        line = read_line_until(self.proc, "ready", timeout=60 + self.cfg.processes * 0.1)
        self.pids = [int(p) for p in line.split("pids=")[1].split(",")]
        return self

    def measure(self) -> Dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write("measure\n")
        self.proc.stdin.flush()
        return dict(json.loads(read_line_until(self.proc, "measured", timeout=60).split(" ", 1)[1]))

    def stop(self) -> Dict[str, Any]:
        """Every process leaves; the simulator's totals."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.close()
        line = read_line_until(self.proc, "done", timeout=STOP_GRACE_S + 60)
        self.proc.wait(30)
        return dict(json.loads(line.split(" ", 1)[1]))

    def kill(self) -> None:
        """The whole process group, whatever state it is in (idempotent)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        stop_process(self.proc, signal.SIGKILL)


class Sampler:
    """The daemon's VmRSS and CPU seconds, read from /proc every *every_s* on a thread of its own."""

    def __init__(self, pid: int, origin: float, every_s: float = 1.0) -> None:
        self.pid, self.origin, self.every_s = pid, origin, every_s
        self.rss: List[Tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(OSError):
                self.rss.append((time.monotonic() - self.origin, rss_kib(self.pid)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise OSError(f"no VmRSS for pid {pid}")


def run_delay_s(pid: int) -> float:
    """Seconds the main thread of *pid* (the daemon's event loop: the IPC) spent runnable but not running."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9


COMMANDS_PER_JOB = 6  # in command_plan


def command_plan(cfg: SoakConfig, trace_dir: Path) -> Iterator[Tuple[str, List[str]]]:
    """One job at a time: its monitor stops, it is traced for two steps, its monitor starts again;
    status, the trace's progress and the process list in between. The other jobs keep reporting.

    ``trace`` asks for the last nputrace's id (:data:`LAST_TRACE` stands for it). Nothing waits for the
    trace (``--wait``) so that one slow process cannot hold the schedule."""
    for cycle in itertools.count():
        job = str(JOB_BASE + cycle % cfg.jobs)
        yield "npu-monitor stop", ["npu-monitor", "--npu-monitor-stop", "--job-id", job]
        yield "nputrace", ["nputrace", "--job-id", job, "--iterations", "2", "--log-file", str(trace_dir)]
        yield "status", ["status"]
        yield "trace", ["trace", LAST_TRACE]
        yield "npu-monitor start", [*monitor_start(cfg), "--job-id", job]
        yield "processes", ["processes"]


LAST_TRACE = "<last trace id>"


def monitor_start(cfg: SoakConfig) -> List[str]:
    return [
        "npu-monitor",
        "--npu-monitor-start",
        "--report-interval-s",
        str(cfg.report_interval_s),
        "--mspti-activity-kind",
        cfg.kinds,
    ]


def run_command(daemon: Daemon, cfg: SoakConfig, name: str, args: List[str], origin: float) -> CommandRun:
    """One real `dyno --json` call, and what its answer says."""
    t0 = time.monotonic()
    try:
        proc = daemon.dyno("--json", *args, timeout=cfg.command_timeout_s)
    except subprocess.TimeoutExpired:
        return CommandRun(name, args, t0 - origin, time.monotonic() - t0, None, False, error="timed out")
    run = CommandRun(name, args, t0 - origin, time.monotonic() - t0, proc.returncode, False)
    try:
        answer = json.loads(proc.stdout) if proc.returncode in (0, 1) and proc.stdout else None
    except ValueError:
        answer = None
    if answer is None:
        run.error = (proc.stderr or proc.stdout).strip()[-500:]
        return run
    if isinstance(answer, list):  # processes
        run.answered, run.registered = proc.returncode == 0, len(answer)
    elif "commandStatus" in answer:
        run.answered = True
        run.effective = answer["commandStatus"] == "effective"
        processes = answer.get("processes", [])
        run.matched = len(processes)
        run.triggered = sum(1 for p in processes if p.get("triggered"))
        run.unanswered_processes = sum(
            1 for p in processes if p.get("triggered") and "no answer yet" in p.get("detail", "")
        )
        run.trace_id = str(answer.get("trace_id", ""))
    elif "trace_id" in answer:  # trace
        run.answered = proc.returncode == 0
        processes = answer.get("processes", [])
        run.matched = len(processes)
        run.finished = sum(1 for p in processes if p.get("phase") == "TRACE_PHASE_FINISHED")
    else:  # status
        run.answered, run.registered = proc.returncode == 0, int(answer.get("processes", -1))
    return run


@dataclass
class CommandRunner:
    """The plan's commands, one after the other on a thread of its own, every ``command_every_s`` (or
    at once when the last one took longer); each one's :class:`CommandRun` goes to *runs*."""

    daemon: Daemon
    cfg: SoakConfig
    plan: Iterator[Tuple[str, List[str]]]
    origin: float
    runs: List[CommandRun]
    say: Callable[[str], None]
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="soak-commands", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        """No new command; the one under way runs to its end (dyno's own deadlines bound it)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.cfg.command_timeout_s + 10)

    def _run(self) -> None:
        next_at = time.monotonic() + self.cfg.command_every_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            name, args = next(self.plan)
            if LAST_TRACE in args:
                last = next((r.trace_id for r in reversed(self.runs) if r.trace_id), "")
                if not last:  # no trace was started (none taken): nothing to follow
                    continue
                args = [last if a == LAST_TRACE else a for a in args]
            run = run_command(self.daemon, self.cfg, name, args, self.origin)
            self.runs.append(run)
            if not run.answered:
                self.say(f"  {name}: NOT ANSWERED ({run.error or run.returncode})")
            next_at += self.cfg.command_every_s


def forgotten(log_file: Path, pids: Set[int]) -> int:
    """How often the daemon's log says it forgot one of *pids* (expired: not heard from, or gone)."""
    count = 0
    for path in sorted(log_file.parent.glob(log_file.name + "*")):  # rotated files too
        with open(path, errors="replace") as f:
            for line in f:
                if "forgot process " in line:
                    with contextlib.suppress(ValueError, IndexError):
                        count += int(line.split("forgot process ")[1].split()[0]) in pids
    return count


def daemon_status(daemon: Daemon) -> Dict[str, Any]:
    return dict(daemon.dyno_json("status"))


@dataclass(frozen=True)
class Snapshot:
    """The daemon's counters and the swarm's at one moment: a measured window runs between two."""

    at: float
    cpu_s: float
    delay_s: float
    swarm: Dict[str, Any]


def snapshot(pid: int, swarm: Swarm) -> Snapshot:
    return Snapshot(time.monotonic(), cpu_seconds(pid), run_delay_s(pid), swarm.measure())


def record_window(result: SoakResult, whole: Tuple[float, float], warm: Snapshot, end: Snapshot) -> None:
    """The figures of the measured window, *warm* to *end*; ``cpu_pct_whole`` from *whole* (the first
    command's time and the daemon's CPU seconds then)."""
    origin, cpu0 = whole
    result.measured_s = end.at - warm.at
    result.cpu_pct = 100 * (end.cpu_s - warm.cpu_s) / result.measured_s
    result.cpu_pct_whole = 100 * (end.cpu_s - cpu0) / (end.at - origin)
    result.wait_pct = 100 * (end.delay_s - warm.delay_s) / result.measured_s
    swarm_s = end.swarm["at"] - warm.swarm["at"]
    result.swarm_cpu_pct = 100 * (end.swarm["cpu_s"] - warm.swarm["cpu_s"]) / swarm_s
    result.swarm_pss_kib = int(end.swarm["pss_kib"])


def record_registry(result: SoakResult, daemon: Daemon, pids: List[int]) -> None:
    """What the daemon's registry holds at the end, and what it lost of *pids* on the way."""
    listed = daemon.dyno_json("processes")
    host_pids = {p["host_pid"] for p in listed}
    result.registry_at_end = len(listed)
    result.missing_at_end = sorted(set(pids) - host_pids)
    seen = [c.registered for c in result.commands if c.registered >= 0]
    result.registry_min_seen = min([*seen, len(listed)])
    result.forgotten = forgotten(daemon.log_file, set(pids))


def record_leave(result: SoakResult, daemon: Daemon, pid: int) -> None:
    """Once the swarm stopped: the daemon read every datagram sent, then (not required) forgot all."""
    sent = result.sent_total
    # Every datagram a process's socket handed to the kernel is in the daemon's queue by now.
    wait_until(
        lambda: daemon_status(daemon)["ipc"]["received"] >= sent,
        timeout=60,
        what=f"the daemon to read the {sent} datagrams the processes sent",
    )
    status = daemon_status(daemon)
    result.ipc = {k: int(v) for k, v in status["ipc"].items()}
    result.dropped = {k: int(v) for k, v in status.get("dropped", {}).items()}
    with contextlib.suppress(AssertionError):  # reported, not required: gone processes are swept
        wait_until(lambda: daemon_status(daemon)["processes"] == 0, timeout=30)
    result.registry_after_leave = int(daemon_status(daemon)["processes"])
    result.rss_kib_after_leave = rss_kib(pid)


def in_a_line(result: SoakResult) -> str:
    refused = sum(result.swarm.get("refused", {}).values())
    return (
        f"RSS {result.rss_kib_warm} -> {result.rss_kib_end} KiB ({result.rss_growth_kib:+d}); daemon CPU "
        f"{result.cpu_pct:.1f}% (waited {result.wait_pct:.1f}%), processes {result.swarm_cpu_pct:.1f}%; "
        f"datagrams sent {result.sent_total}, read {result.ipc.get('received')}, handled "
        f"{result.ipc.get('handled')}, malformed {result.ipc.get('malformed')}, rejected "
        f"{result.ipc.get('rejected_senders')}, refused by the kernel {refused} times; commands "
        f"answered {len(result.commands) - len(result.unanswered)} of {len(result.commands)}; registry "
        f"{result.registry_at_end} (fewest {result.registry_min_seen}), forgotten {result.forgotten}"
    )


def ramp_up(swarm: Swarm, result: SoakResult, pid: int, say: Callable[[str], None]) -> None:
    say(f"starting {result.config.processes} simulated processes")
    t_launch = time.monotonic()
    swarm.start()
    result.pids = swarm.pids
    result.ramp_s = time.monotonic() - t_launch
    result.rss_kib_ready = rss_kib(pid)
    say(f"all {len(swarm.pids)} registered after {result.ramp_s:.1f} s; RSS {result.rss_kib_ready} KiB")


def run_soak(
    daemon: Daemon, cfg: SoakConfig, workdir: Path, say: Callable[[str], None] = print
) -> SoakResult:
    """Soak *daemon* (started with ``cfg.daemon_args()``) with ``cfg.processes`` simulated processes.

    Every process started here is stopped here, on failure too.
    """
    assert daemon.proc is not None
    pid = daemon.proc.pid
    result = SoakResult(cfg)
    trace_dir = workdir / "traces"
    trace_dir.mkdir(parents=True, exist_ok=True)
    swarm = Swarm(daemon, cfg, workdir / "swarm.log")
    sampler: Optional[Sampler] = None
    commands: Optional[CommandRunner] = None
    try:
        ramp_up(swarm, result, pid, say)
        origin = time.monotonic()
        sampler = Sampler(pid, origin).start()
        whole = (origin, cpu_seconds(pid))
        result.commands.append(
            run_command(daemon, cfg, "npu-monitor start (all)", monitor_start(cfg), origin)
        )
        commands = CommandRunner(daemon, cfg, command_plan(cfg, trace_dir), origin, result.commands, say)
        commands.start()
        # The measured window is timed here, whatever the commands take: they run on their own thread.
        time.sleep(max(0.0, origin + cfg.warmup_s - time.monotonic()))
        result.rss_kib_warm = rss_kib(pid)
        warm = snapshot(pid, swarm)
        say(f"warm-up over at {warm.at - origin:.0f} s: daemon RSS {result.rss_kib_warm} KiB")
        time.sleep(max(0.0, origin + cfg.duration_s - time.monotonic()))
        commands.finish()

        end = snapshot(pid, swarm)
        result.rss_kib_end = rss_kib(pid)
        sampler.stop()
        result.rss_kib = sampler.rss
        record_window(result, whole, warm, end)
        result.rss_kib_peak = max([r for t, r in result.rss_kib if t >= cfg.warmup_s] + [result.rss_kib_end])
        record_registry(result, daemon, swarm.pids)
        say(
            f"end: {result.registry_at_end} registered, daemon RSS {result.rss_kib_end} KiB, "
            f"CPU {result.cpu_pct:.1f}% of a core; stopping the swarm"
        )
        result.swarm = swarm.stop()
        record_leave(result, daemon, pid)
        say(in_a_line(result))
        return result
    finally:
        if commands is not None:
            commands.finish()
        if sampler is not None:
            sampler.stop()
        swarm.kill()


if __name__ == "__main__":
    sys.exit(main())
