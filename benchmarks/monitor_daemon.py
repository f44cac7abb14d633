"""npu-monitor on the daemon: reports per second from 64 processes, and its CPU and memory at a 1 s interval.

Real processes against a real ``dynolog`` (private pathname sockets), once without sinks and once with
all three (``--metric-log-dir``, ``--prometheus-port``, ``--use_JSON``). 64 sender processes each do on
the wire what a plugin process does: bind an ``AF_UNIX SOCK_DGRAM`` pathname socket in the daemon's socket
directory, register with ``mm.hello`` (and wait for the ``mm.ack``), then send interval reports as
``mm.metrics`` chunks (``Report.to_chunks()``). Each report is built with the plugin's own ``Aggregator``:
4 kinds (Kernel and Communication on the process's device, API and Marker on the host), 40 names each, of
which the top 10 per kind are reported — ~5 KB of JSON, one chunk. The phases, all 64 processes at once:

* **1 s interval, synchronized**: one report per process per second, all at the same instant, as when
  one ``dyno npu-monitor --npu-monitor-start`` started every process's interval timer. Sends are
  non-blocking, as the plugin's are; a send the kernel refuses (``EAGAIN``: the daemon's socket holds
  ``net.unix.max_dgram_qlen`` datagrams) is counted and retried as the plugin retries it (its own
  ``link.Backoff``: from 10 ms, doubling to 100 ms, each wait jittered). The daemon's CPU over the
  window (utime+stime from ``/proc/<pid>/stat``, cross-checked with ``schedstat``), and its memory.
* **1 s interval, spread**: the same, each process at its own phase of the second.
* **flood**: every process sends reports back to back (blocking sends) for a few seconds: the reports
  the daemon ingests per second are the datagrams the processes got into its socket over the phase (a
  blocking sender waits for room, so that is what the daemon read, give or take its 10-datagram queue).
  Then, still flooding, one ``GetStatus`` RPC: how long gRPC waits behind the IPC.
* **with a watcher**: a ``WatchMetrics`` stream opened, as ``dyno npu-monitor --watch`` does; the 1 s
  interval (synced) again and the flood again, counting the reports the stream delivers.

Afterwards every report is accounted for: the processes stop, then the benchmark sends one more report
and waits until the watcher has it — the daemon has then handled everything before it — and compares
the datagrams the processes sent with those the daemon received (``ipc.received``) and counted
malformed, and each process's latest report as the daemon keeps it with the last one it sent.

Then, per destination, reports delivered against reports produced, and those the daemon counted as
dropped (``GetStatus().dropped``, the counters ``dyno status`` shows): produced - delivered - dropped is
what a destination lost unseen, and should be 0. Delivered is read at each destination's output:

* WatchMetrics stream — the messages the benchmark's client read; produced: the reports the processes
  sent while it watched (and the daemon's own count of reports it handed to the stream); dropped:
  ``watch_queue``;
* with sinks, produced is the daemon's count of reports received whole
  (``dynolog_monitor_reports_total{stage="received"}``), once the sink thread has worked through its
  queue; dropped: ``sink_queue`` (all sinks lose the report) plus ``sink_error:<Sink>``;
* Prometheus — each process's ``msmonitor_records_total`` divided by the records in one of its reports;
* JSONL log — the lines in ``dynolog_metrics.jsonl*`` (after the daemon stopped); when rotation has
  deleted a file, the sink's own count (``stage="sink:JsonlSink"``) instead;
* TensorBoard — the events in the event files' host runs (one per report), after the daemon stopped
  and closed them.

The sinks' own counts (``sink:<Sink>``) are kept beside the measured ones in the JSON. A short
in-process part times the daemon's handling of one report (``IpcDispatcher.dispatch``) and each sink's
``emit``, to say where the time goes. Every process started here is stopped on the way out.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import multiprocessing
import os
import queue
import random
import socket
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from _bench import (
    Daemon,
    Figure,
    cpu_schedstat_s,
    cpu_seconds,
    free_port,
    proc_status,
    report,
    running_daemon,
)
from msmonitor_contract import wire
from msmonitor_contract.activity import Kind
from msmonitor_contract.report import Report
from msmonitor_contract.vocabulary import CommandKind, MonitorState
from msmonitor_plugin.link import UNSENT_RETRY_S, Backoff
from msmonitor_plugin.monitor.aggregate import Aggregator

PROCESSES = 64
NAMES_PER_KIND = 40
JOB_ID = 4242
SEQ_MARK = 987654321  # stands for the sequence number in the pre-encoded chunks
PROBE_SEQ = 2_000_000_000  # reports the benchmark process itself sends, to sync with the watcher
SEND_TIMEOUT_S = 5.0  # a blocking (flood) send that waits this long is counted as a timeout
GIVE_UP_S = 1.0  # a refused non-blocking send is retried (as the plugin does) for at most this long
STATUS_TIMEOUT_S = 60.0  # a GetStatus during a flood with sinks takes ~12 s

# Phases, set by the benchmark process in a shared integer that every sender polls.
IDLE, SYNCED, SPREAD, SYNCED_WATCHED, FLOOD, WATCHED, STOP, EXIT = range(8)
PHASES = {
    SYNCED: "synced",
    SPREAD: "spread",
    SYNCED_WATCHED: "synced_watched",
    FLOOD: "flood",
    WATCHED: "watched",
}


# --- what a process sends -----------------------------------------------------------------------


def build_report(rank: int, device: int, seq: int = SEQ_MARK) -> Report:
    """One interval of one process, aggregated by the plugin's own Aggregator (top 10 of 40 names)."""
    rng = random.Random(rank)
    agg = Aggregator()
    for kind, dev in ((Kind.KERNEL, device), (Kind.API, -1), (Kind.COMMUNICATION, device), (Kind.MARKER, -1)):
        rows = []
        for i in range(NAMES_PER_KIND):
            key: Any
            if kind == Kind.MARKER:
                key = ("torch", f"ProfilerStep/forward/decoder_layer_{i}")
            elif kind == Kind.COMMUNICATION:
                key = f"hcom_allReduce__{i}_{rng.randrange(10**6)}_1"
            elif kind == Kind.API:
                key = f"aclnnInplaceCopy_{i}_GetWorkspaceSize"
            else:
                key = f"aclnnMatmul_MatMulV3_MatMulV3_{i}_fp16_{rng.randrange(10**6)}"
            count, mean = rng.randint(1, 500), rng.randint(1_000, 2_000_000)
            rows.append((kind, dev, key, count, count * mean, mean // 2, mean * 2))
        agg.merge(rows)
    now = time.time_ns()
    return agg.take(seq=seq, pid=os.getpid(), backend="mspti", start_ns=now - 10**9, end_ns=now)


@dataclass
class Template:
    """A report's chunks, encoded once; :meth:`datagrams` puts a sequence number in."""

    chunks: List[bytes]
    records: int  # records the report accounts for (all kinds)

    @classmethod
    def of(cls, report: Report) -> Template:
        chunks = report.to_chunks()
        mark = f'"seq":{SEQ_MARK},'.encode()
        assert all(c.count(mark) == 1 for c in chunks), "the sequence mark must appear once per chunk"
        return cls(chunks, sum(k.count for k in report.kinds))

    def datagrams(self, seq: int) -> List[bytes]:
        mark, real = f'"seq":{SEQ_MARK},'.encode(), f'"seq":{seq},'.encode()
        return [wire.encode(wire.METRICS, c.replace(mark, real, 1)) for c in self.chunks]

    @property
    def size(self) -> int:
        return sum(len(c) for c in self.chunks)


def hello(rank: int) -> wire.Hello:
    return wire.Hello(
        pid=os.getpid(),
        ancestors=[os.getppid()],
        job_id=JOB_ID,
        rank=rank,
        local_rank=rank % 8,
        world_size=PROCESSES,
        devices=[rank % 8],
        backend="torch_npu",
        plugin_version="bench",
        capabilities=["push", CommandKind.GPUTRACE.value, CommandKind.NPUMONITOR.value],
        hostname=socket.gethostname(),
        monitor_state=MonitorState.RUNNING.value,
    )


def open_socket(socket_dir: str, tag: str) -> socket.socket:
    address = os.path.join(socket_dir, tag)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    os.chmod(address, 0o600)
    return sock


def register(sock: socket.socket, daemon: str, rank: int) -> None:
    """``mm.hello``, then wait for the daemon's ``mm.ack``."""
    sock.settimeout(10.0)
    sock.sendto(wire.encode(wire.HELLO, hello(rank).to_payload()), daemon)
    while wire.decode(sock.recv(wire.MAX_DATAGRAM)).type != wire.ACK:
        pass


def close_socket(sock: socket.socket) -> None:
    address = sock.getsockname()
    sock.close()
    with contextlib.suppress(OSError):
        os.unlink(address)


@dataclass
class Counts:
    reports: int = 0
    datagrams: int = 0  # datagrams the kernel took
    refused: int = 0  # non-blocking sends the kernel refused (EAGAIN), each retried
    delayed: int = 0  # reports that waited more than 5 ms for room in the daemon's queue
    max_delay_s: float = 0.0  # the longest such wait
    timeouts: int = 0  # datagrams given up on (never sent)


class Link(NamedTuple):
    """A sender's socket and the daemon's address it sends to."""

    sock: socket.socket
    daemon: str


def _send_paced(link: Link, datagrams: List[bytes], c: Counts, due: float, backoff: Backoff) -> None:
    """Non-blocking, as the plugin sends; a refused datagram is retried after the plugin's own back-off
    (*backoff*: UNSENT_RETRY_S, doubling, jittered) up to GIVE_UP_S after *due*."""
    for data in datagrams:
        while True:
            try:
                link.sock.sendto(data, link.daemon)
                c.datagrams += 1
                backoff.reset()
                break
            except OSError as exc:
                if exc.errno != errno.EAGAIN or time.monotonic() - due > GIVE_UP_S:
                    c.timeouts += 1
                    backoff.reset()
                    break
                c.refused += 1
                time.sleep(backoff.next())
    c.reports += 1
    waited = time.monotonic() - due
    c.delayed += waited > 0.005
    c.max_delay_s = max(c.max_delay_s, waited)


def _flood(link: Link, template: Template, c: Counts, seq: int, phase: Any) -> int:
    """Reports back to back with blocking sends while *phase* holds its value; returns the last seq."""
    running = phase.value
    while phase.value == running:
        seq += 1
        for data in template.datagrams(seq):
            try:
                link.sock.sendto(data, link.daemon)
                c.datagrams += 1
            except OSError:  # SO_SNDTIMEO expired: the daemon read nothing for SEND_TIMEOUT_S
                c.timeouts += 1
        c.reports += 1
    return seq


def sender(socket_dir: str, rank: int, shared: Any, ready: Any, results: Any) -> None:
    """One plugin-like process: registers, runs the phases the benchmark sets, then says what it sent."""
    phase_value, base_value = shared
    counts = {p: Counts() for p in PHASES}
    backoff = Backoff(UNSENT_RETRY_S, random.Random(rank))  # a Random of its own, as each plugin's link
    sock = open_socket(socket_dir, f"mb{rank:02d}")
    daemon = str(wire.endpoint_address(wire.DAEMON_ENDPOINT, socket_dir))
    try:
        register(sock, daemon, rank)
        template = Template.of(build_report(rank, rank % 8))
        ready.put((rank, os.getpid(), template.records, len(template.chunks), template.size))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("@ll", int(SEND_TIMEOUT_S), 0))
        seq = 0
        while True:
            phase = phase_value.value
            if phase == STOP:
                break
            if phase in (SYNCED, SPREAD, SYNCED_WATCHED):
                # Ticks on the shared clock: all at base + n (synced), or each at its own offset (spread).
                zero = base_value.value + (rank / PROCESSES if phase == SPREAD else 0.0)
                tick = zero + max(0, int(time.monotonic() - zero) + 1)
                while phase_value.value == phase and time.monotonic() < tick:
                    time.sleep(min(0.05, max(0.0, tick - time.monotonic())))
                if phase_value.value != phase:
                    continue
                seq += 1
                sock.setblocking(False)
                _send_paced(Link(sock, daemon), template.datagrams(seq), counts[phase], tick, backoff)
            elif phase in (FLOOD, WATCHED):
                sock.setblocking(True)  # the kernel's SO_SNDTIMEO still bounds each send
                seq = _flood(Link(sock, daemon), template, counts[phase], seq, phase_value)
            else:
                time.sleep(0.005)
        results.put((rank, {PHASES[p]: vars(c) for p, c in counts.items()}))
        # Stay registered (alive) until the benchmark has read the daemon's state; no mm.bye, so that the
        # daemon's counters hold only reports and hellos (64 byes at once also overflow its queue).
        deadline = time.monotonic() + 120
        while phase_value.value != EXIT and time.monotonic() < deadline:
            time.sleep(0.01)
    except Exception as exc:  # the benchmark process reports it
        results.put((rank, f"{type(exc).__name__}: {exc}"))
    finally:
        close_socket(sock)


@dataclass
class Fleet:
    phase: Any  # shared int: the phase every sender follows
    base: Any  # shared float: monotonic time of the paced phases' tick 0
    pid_of: Dict[int, int]
    records_of: Dict[int, int]
    chunks_per_report: int
    report_bytes: int
    results: Any


@contextlib.contextmanager
def fleet(socket_dir: str, n: int) -> Iterator[Fleet]:
    """*n* registered sender processes, idle until a phase is set; all stopped on the way out."""
    ctx = multiprocessing.get_context("forkserver")  # forked from a clean server: no gRPC state inside
    phase, base = ctx.RawValue("i", IDLE), ctx.RawValue("d", 0.0)
    ready, results = ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=sender, args=(socket_dir, i, (phase, base), ready, results), daemon=True)
        for i in range(n)
    ]
    try:
        for p in procs:
            p.start()
        rows = [ready.get(timeout=60) for _ in range(n)]
        chunks = {row[3] for row in rows}
        assert len(chunks) == 1, f"every report should have as many chunks: {chunks}"
        yield Fleet(
            phase,
            base,
            {rank: pid for rank, pid, *_ in rows},
            {rank: records for rank, _, records, *_ in rows},
            chunks.pop(),
            max(row[4] for row in rows),
            results,
        )
    finally:
        phase.value = EXIT
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()


def collect(results: Any, n: int) -> Dict[int, Dict[str, Dict[str, float]]]:
    out: Dict[int, Any] = {}
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        try:
            rank, payload = results.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        out[rank] = payload
    bad = {r: p for r, p in out.items() if not isinstance(p, dict)}
    if len(out) < n or bad:
        raise RuntimeError(f"{n - len(out)} senders sent no result; failures: {bad}")
    return out


_T0 = time.monotonic()


def say(what: str) -> None:
    print(f"[{time.monotonic() - _T0:6.1f} s] {what}", flush=True)


# --- the daemon seen from outside ---------------------------------------------------------------


def has_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


@dataclass
class Sample:
    t: float
    ticks: float  # utime + stime, s
    sched: float  # on-CPU time of all threads, s
    watched: int


class Observer:
    """The daemon from outside: CPU from /proc, counters by GetStatus, and a WatchMetrics stream."""

    def __init__(self, daemon: Daemon) -> None:
        import grpc  # here, not at import: the sender processes never load gRPC

        from dynoproto import dynolog_pb2 as pb
        from dynoproto import dynolog_pb2_grpc as pb_grpc

        assert daemon.proc is not None
        self.pid = daemon.proc.pid
        self.pb = pb
        self.channel = grpc.insecure_channel(f"127.0.0.1:{daemon.port}")
        self.stub = pb_grpc.DynologStub(self.channel)
        self.watched = 0
        self._probes: Set[int] = set()
        self._stream: Any = None
        self._thread: Optional[threading.Thread] = None
        self._seen = threading.Condition()

    def sample(self) -> Sample:
        return Sample(time.monotonic(), cpu_seconds(self.pid), cpu_schedstat_s(self.pid), self.watched)

    def status(self) -> Any:
        return self.stub.GetStatus(self.pb.GetStatusRequest(), timeout=STATUS_TIMEOUT_S)

    def counters(self) -> Any:
        return self.status().ipc

    def time_status(self) -> float:
        t0 = time.perf_counter()
        self.counters()
        return time.perf_counter() - t0

    def start_watch(self) -> None:
        self._stream = self.stub.WatchMetrics(self.pb.WatchMetricsRequest())
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        me = os.getpid()
        with contextlib.suppress(Exception):  # cancelled at the end
            for message in self._stream:
                if message.host_pid != me:
                    self.watched += 1
                    continue
                with self._seen:
                    self._probes.add(message.seq)
                    self._seen.notify_all()

    def wait_probe(self, seq: int, timeout: float) -> bool:
        with self._seen:
            return self._seen.wait_for(lambda: seq in self._probes, timeout)

    def latest(self) -> Dict[int, int]:
        """Each process's latest report as the daemon keeps it: host pid -> seq."""
        out: Dict[int, int] = {}
        stream = self.stub.WatchMetrics(self.pb.WatchMetricsRequest(latest=True), timeout=3)
        with contextlib.suppress(Exception):  # the deadline ends the stream once the latest are in
            for message in stream:
                out[message.host_pid] = message.seq
        return out

    def close(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
        if self._thread is not None:
            self._thread.join(5)
        self.channel.close()


def window(before: Sample, after: Sample, reports: float) -> Dict[str, float]:
    s = after.t - before.t
    return {
        "seconds": s,
        "reports": reports,
        "reports_per_s": reports / s,
        "watched_per_s": (after.watched - before.watched) / s,
        "cpu_pct": 100 * (after.ticks - before.ticks) / s,
        "cpu_pct_schedstat": 100 * (after.sched - before.sched) / s,
        "cpu_us_per_report": 1e6 * (after.sched - before.sched) / max(reports, 1),
    }


@dataclass
class Scrape:
    records: Dict[str, float]  # rank label -> msmonitor_records_total, all kinds and devices
    reports: Dict[str, float]  # dynolog_monitor_reports_total by stage
    dropped: Dict[str, float]  # dynolog_dropped_total by where


def scrape(port: int) -> Scrape:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = Scrape({}, {}, {})
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "msmonitor_records_total":
                rank = sample.labels["rank"]
                out.records[rank] = out.records.get(rank, 0.0) + sample.value
            elif sample.name == "dynolog_monitor_reports_total":
                out.reports[sample.labels["stage"]] = sample.value
            elif sample.name == "dynolog_dropped_total":
                out.dropped[sample.labels["where"]] = sample.value
    return out


SINKS = {"jsonl": "JsonlSink", "tensorboard": "TensorBoardSink", "prometheus": "PrometheusSink"}


def sinks_settled(port: int, timeout: float) -> Scrape:
    """The scrape once every sink has taken or dropped every report received (the sink thread works
    through its queue after the IPC has gone quiet); the last scrape if that takes too long."""
    deadline = time.monotonic() + timeout
    while True:
        now = scrape(port)
        received = now.reports.get("received", 0)
        done = all(
            now.reports.get(f"sink:{name}", 0)
            + now.dropped.get("sink_queue", 0)
            + now.dropped.get(f"sink_error:{name}", 0)
            >= received
            for name in SINKS.values()
        )
        if done or time.monotonic() > deadline:
            return now
        time.sleep(0.2)  # polling another process's counters


def tensorboard_reports(log_dir: Path) -> int:
    """Reports in the TensorBoard event files: each report is one event in its process's host run."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    return sum(
        1
        for path in (log_dir / "device_host").rglob("events.out.tfevents.*")
        for event in EventFileLoader(str(path)).Load()
        if event.HasField("summary")
    )


def delivery(produced: float, delivered: float, dropped: float, how: str) -> Dict[str, Any]:
    return {
        "produced": produced,
        "delivered": delivered,
        "dropped": dropped,
        "lost_unseen": produced - delivered - dropped,
        "delivered_is": how,
    }


@dataclass
class Prober:
    """The benchmark process as one more registered process: its probe reports, sent after the senders',
    mark where the WatchMetrics stream has got to."""

    link: Link
    template: Template
    seqs: List[int] = field(default_factory=lambda: [PROBE_SEQ])

    @classmethod
    def registered(cls, stack: contextlib.ExitStack, socket_dir: str) -> Prober:
        me = open_socket(socket_dir, "mbprobe")
        stack.callback(close_socket, me)
        link = Link(me, str(wire.endpoint_address(wire.DAEMON_ENDPOINT, socket_dir)))
        register(link.sock, link.daemon, -1)
        return cls(link, Template.of(build_report(-1, 0)))

    def send(self) -> int:
        self.seqs.append(self.seqs[-1] + 1)
        for data in self.template.datagrams(self.seqs[-1]):
            self.link.sock.sendto(data, self.link.daemon)
        return self.seqs[-1]

    @property
    def sent(self) -> int:
        return len(self.seqs) - 1


@dataclass
class Phases:
    """Leads the fleet through the phases; each phase's window of the daemon's CPU and its memory."""

    f: Fleet
    obs: Observer
    n: int
    windows: Dict[str, Dict[str, float]] = field(default_factory=dict)
    memory: Dict[str, Any] = field(default_factory=dict)

    def paced(self, which: int, seconds: float, warm_up: int = 1) -> None:
        f, obs = self.f, self.obs
        say(f"1 s interval, {PHASES[which]}")
        f.base.value = time.monotonic() + 0.2
        f.phase.value = which
        time.sleep(0.2 + warm_up)  # the first reports of all create the sinks' files
        # Start and end halfway between ticks, so the window holds whole intervals.
        time.sleep((f.base.value + 0.5 - time.monotonic()) % 1.0)
        before = obs.sample()
        time.sleep(round(seconds))
        after = obs.sample()
        self.memory[PHASES[which]] = proc_status(obs.pid)
        f.phase.value = IDLE
        self.windows[PHASES[which]] = window(before, after, self.n * round(seconds))
        time.sleep(1.2)

    def flood(self, which: int, seconds: float, status_calls: int = 0) -> List[float]:
        f, obs = self.f, self.obs
        say(PHASES[which])
        t_on = time.monotonic()
        f.phase.value = which
        time.sleep(0.5)
        before = obs.sample()
        time.sleep(seconds)
        after = obs.sample()
        self.memory[PHASES[which]] = proc_status(obs.pid)
        waits = [obs.time_status() for _ in range(status_calls)]  # still flooding
        f.phase.value = IDLE
        self.windows[PHASES[which]] = window(before, after, 0)
        self.windows[PHASES[which]]["phase_s"] = time.monotonic() - t_on
        return waits

    def all(self, prober: Prober, paced_s: float, flood_s: float) -> Tuple[List[float], int]:
        """Every phase in turn; the GetStatus waits under the flood, and the probes the watch missed."""
        self.paced(SYNCED, paced_s, warm_up=2)
        self.paced(SPREAD, paced_s * 0.4)
        status_waits = self.flood(FLOOD, flood_s, status_calls=1)
        time.sleep(0.5)
        self.obs.start_watch()
        if not any(self.obs.wait_probe(prober.send(), 0.5) for _ in range(20)):
            raise RuntimeError("the WatchMetrics stream saw none of the probe reports")
        unwatched_probes = len(prober.seqs) - 2  # those sent before the stream saw the first
        self.paced(SYNCED_WATCHED, paced_s * 0.3)
        self.flood(WATCHED, flood_s)
        return status_waits, unwatched_probes


Totals = Dict[str, Dict[str, float]]


def totals_of(sent: Dict[int, Dict[str, Dict[str, float]]]) -> Totals:
    """The senders' counts summed per phase (the longest delay: the largest)."""
    return {
        name: {
            k: (max if k == "max_delay_s" else sum)(s[name][k] for s in sent.values()) for k in vars(Counts())
        }
        for name in PHASES.values()
    }


def complete_windows(
    windows: Dict[str, Dict[str, float]], totals: Totals, chunks_per_report: int, status_waits: List[float]
) -> None:
    # Flood: reports per second are the datagrams the senders got into the daemon's socket over the
    # phase (blocking sends: each waited for room, so the daemon read them), from the senders' counts.
    for name in ("flood", "watched"):
        w = windows[name]
        w["reports"] = totals[name]["datagrams"] / chunks_per_report
        w["reports_per_s"] = w["reports"] / w["phase_s"]
        w["cpu_us_per_report"] = 1e6 * (w["cpu_pct_schedstat"] / 100) / w["reports_per_s"]
    windows["flood"]["getstatus_s"] = status_waits[0]
    for name in ("synced_watched", "watched"):
        w = windows[name]
        w["watched_share"] = w["watched_per_s"] / w["reports_per_s"]


@dataclass
class End:
    """What the run ended with: the senders' totals, the daemon's counters, what the watch saw."""

    f: Fleet
    totals: Totals
    total_reports: Dict[int, float]  # rank -> reports it sent, all phases
    probes: int
    final: Any  # the daemon's IPC counters
    dropped: Dict[str, int]
    accounting: Dict[str, Any] = field(default_factory=dict)
    # Per destination: the reports it should have had, those found at its output, those the daemon
    # counted as dropped on the way; what is left was lost unseen.
    deliveries: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def account(self, watch_complete: bool, latest: Dict[int, int]) -> None:
        f, final = self.f, self.final
        self.accounting = {
            "datagrams_sent": sum(t["datagrams"] for t in self.totals.values()),
            "datagrams_not_sent": sum(t["timeouts"] for t in self.totals.values()),
            # less the n + 1 hellos and the probe reports
            "datagrams_received": final.received - (len(f.pid_of) + 1) - self.probes * f.chunks_per_report,
            "malformed": final.malformed,
            "rejected_senders": final.rejected_senders,
            "watch_complete": watch_complete,
            "processes_in_latest": len(latest),
            "latest_is_last_sent": sum(latest.get(f.pid_of[r]) == t for r, t in self.total_reports.items()),
            "dropped": self.dropped,
        }

    def watch_delivery(self, obs: Observer, unwatched_probes: int) -> None:
        whole = [
            self.totals[p]["datagrams"] / self.f.chunks_per_report for p in ("synced_watched", "watched")
        ]
        self.deliveries["watch"] = delivery(
            sum(whole) + self.probes - unwatched_probes,
            obs.watched + len(obs._probes),
            self.dropped.get("watch_queue", 0),
            "messages the WatchMetrics client read; should have: reports sent while it watched",
        )


def sink_deliveries(end: End, prometheus: Scrape, probe_records: int, daemon: Daemon, tb: Path) -> None:
    """Each sink's delivery, from Prometheus' scrape and then, *daemon* stopped, from the files."""
    f, dropped, total_reports = end.f, end.dropped, end.total_reports
    accounting, deliveries = end.accounting, end.deliveries
    expected = sum(total_reports[r] * f.records_of[r] for r in total_reports) + end.probes * probe_records
    accounting["prometheus_records_total"] = sum(prometheus.records.values())
    accounting["records_sent"] = expected
    accounting["daemon_report_counts"] = prometheus.reports
    deliveries["watch"]["daemon_handed_to_streams"] = prometheus.reports.get("watch", 0)
    received = prometheus.reports.get("received", 0)
    accounting["reports_sent"] = sum(total_reports.values()) + end.probes
    sink_lost = {
        name: dropped.get("sink_queue", 0) + dropped.get(f"sink_error:{name}", 0) for name in SINKS.values()
    }
    # Prometheus: each process's records_total over the records of one of its reports.
    per_report = {str(r): f.records_of[r] for r in total_reports}
    per_report[f"pid{os.getpid()}"] = probe_records
    deliveries["prometheus"] = delivery(
        received,
        sum(total / per_report[rank] for rank, total in prometheus.records.items()),
        sink_lost["PrometheusSink"],
        "msmonitor_records_total of each process / records in one of its reports",
    )
    daemon.stop()  # the sinks write what is queued and close their files
    jsonl = sorted(daemon.log_file.parent.glob("dynolog_metrics.jsonl*"))
    accounting["jsonl_files"] = len(jsonl)
    accounting["jsonl_lines"] = sum(sum(1 for _ in p.open("rb")) for p in jsonl)
    # Rotation deletes only the oldest of five backups: while there is no .5, every line is on disk.
    rotated_away = any(p.name.endswith(".5") for p in jsonl)
    deliveries["jsonl"] = delivery(
        received,
        prometheus.reports.get("sink:JsonlSink", 0) if rotated_away else accounting["jsonl_lines"],
        sink_lost["JsonlSink"],
        "the sink's own count (rotation deleted files)" if rotated_away else "lines in the files",
    )
    accounting["tensorboard_event_files"] = len(list(tb.rglob("events.out.tfevents.*")))
    deliveries["tensorboard"] = delivery(
        received,
        tensorboard_reports(tb),
        sink_lost["TensorBoardSink"],
        "events in the files' host runs (one per report)",
    )
    for key, name in SINKS.items():
        deliveries[key]["daemon_count"] = prometheus.reports.get(f"sink:{name}", 0)


def run(with_sinks: bool, paced_s: float, flood_s: float, n: int) -> Dict[str, Any]:
    """One daemon, *n* processes, every phase; the measured windows and the accounting."""
    prom_port = free_port() if with_sinks else 0
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="msmonitor-bench-sinks-")))
        args: List[str] = []
        if with_sinks:
            args = ["--metric-log-dir", str(tmp / "tb"), "--prometheus-port", str(prom_port), "--use_JSON"]
        t_start = time.monotonic()
        say(f"daemon ({'all sinks' if with_sinks else 'no sinks'})")
        daemon = stack.enter_context(running_daemon(*args))
        started_s = time.monotonic() - t_start
        socket_dir = str(daemon.socket_dir)
        say(f"{n} processes")
        f = stack.enter_context(fleet(socket_dir, n))
        obs = Observer(daemon)
        stack.callback(obs.close)
        # The benchmark process registers too, and sends probe reports to sync with the watcher.
        prober = Prober.registered(stack, socket_dir)
        phases = Phases(f, obs, n, memory={"registered": proc_status(obs.pid)})
        status_waits, unwatched_probes = phases.all(prober, paced_s, flood_s)
        say("accounting")
        f.phase.value = STOP
        sent = collect(f.results, n)  # each sender's last datagram is in the daemon's socket by now
        watch_complete = obs.wait_probe(prober.send(), 60.0)
        latest = obs.latest()
        prometheus = sinks_settled(prom_port, 120.0) if with_sinks else None
        status = obs.status()
        f.phase.value = EXIT
        phases.memory["end"] = proc_status(obs.pid)
        torch_loaded = has_torch(obs.pid)  # now: with sinks, the daemon is stopped below

        totals = totals_of(sent)
        complete_windows(phases.windows, totals, f.chunks_per_report, status_waits)
        total_reports = {rank: sum(s[p]["reports"] for p in s) for rank, s in sent.items()}
        end = End(f, totals, total_reports, prober.sent, status.ipc, dict(status.dropped))
        end.account(watch_complete, latest)
        end.watch_delivery(obs, unwatched_probes)
        if with_sinks:
            assert prometheus is not None
            sink_deliveries(end, prometheus, prober.template.records, daemon, tmp / "tb")
        return {
            "sinks": with_sinks,
            "daemon_start_s": started_s,
            "torch_in_daemon": torch_loaded,
            "report_bytes": f.report_bytes,
            "chunks_per_report": f.chunks_per_report,
            "windows": phases.windows,
            "memory_kib": phases.memory,
            "sent": totals,
            "accounting": end.accounting,
            "deliveries": end.deliveries,
        }
    raise AssertionError("unreachable")


# --- in-process: where one report's time goes ----------------------------------------------------


def in_process(reports: int) -> Dict[str, float]:
    """µs per report: ``IpcDispatcher.dispatch`` without sinks, and each sink's ``emit`` (64 processes)."""
    from dynolog.ipc.dispatch import IpcDispatcher
    from dynolog.ipc.endpoint import Sender
    from dynolog.monitoring.sinks import ProcessLabels
    from dynolog.monitoring.sinks.jsonl import JsonlSink
    from dynolog.monitoring.sinks.prometheus import PrometheusSink
    from dynolog.monitoring.sinks.tensorboard import TensorBoardSink
    from dynolog.node import Node

    class Endpoint:  # replies go nowhere
        def send(self, data: bytes, address: Any) -> bool:
            return True

    out: Dict[str, float] = {}
    node = Node.build(60.0)
    ipc = IpcDispatcher(node, [os.getuid()])
    me = Sender("/nonexistent", os.getpid(), os.getuid())
    ipc.dispatch(Endpoint(), wire.encode(wire.HELLO, hello(0).to_payload()), me)  # type: ignore[arg-type]
    template = Template.of(build_report(0, 0))
    datagrams = [template.datagrams(i)[0] for i in range(1, reports + 1)]
    t0 = time.perf_counter()
    for data in datagrams:
        ipc.dispatch(Endpoint(), data, me)  # type: ignore[arg-type]
    out["dispatch"] = (time.perf_counter() - t0) / reports * 1e6
    assert ipc.counters.malformed == 0
    node.close()

    report_ = build_report(0, 0)
    who = [ProcessLabels("host", str(JOB_ID), r, 100_000 + r) for r in range(PROCESSES)]
    with tempfile.TemporaryDirectory(prefix="msmonitor-bench-emit-") as tmp:
        sinks: List[Tuple[str, Any, int]] = [
            ("jsonl", JsonlSink(Path(tmp) / "m.jsonl"), reports),
            ("prometheus", PrometheusSink(port=None), reports),
            ("tensorboard", TensorBoardSink(Path(tmp) / "tb"), max(PROCESSES, reports // 10)),
        ]
        for name, sink, count in sinks:
            try:
                for labels in who:  # first report of each process: files and writers are created
                    sink.emit(labels, report_)
                t0 = time.perf_counter()
                for i in range(count):
                    sink.emit(who[i % PROCESSES], report_)
                out[name] = (time.perf_counter() - t0) / count * 1e6
            finally:
                sink.close()
    return out


# --- the table --------------------------------------------------------------------------------------


DESTINATIONS = {
    "jsonl": "JSONL log",
    "tensorboard": "TensorBoard",
    "prometheus": "Prometheus",
    "watch": "WatchMetrics stream",
}
MSMONITOR_INGEST = "~1 000 data msgs/s (1 ms poll loop; derived)"
MSMONITOR_RETRY = "client: 5 retries from 1 ms, then dropped"


def figures_of(runs: Dict[str, Dict[str, Any]], emit: Dict[str, float], n: int) -> List[Figure]:
    figs: List[Figure] = []
    for label, r in runs.items():
        w, sent, mem, acc = r["windows"], r["sent"], r["memory_kib"], r["accounting"]
        flood, watched, synced, spread = w["flood"], w["watched"], w["synced"], w["spread"]

        def add(what: str, value: float, unit: str = "", ref: str = "", label: str = label) -> None:
            figs.append(Figure(f"{label}: {what}", value, unit, reference=ref))

        add(f"flood, reports/s ingested ({n} processes)", flood["reports_per_s"], "/s", MSMONITOR_INGEST)
        add("flood, datagrams/s", flood["reports_per_s"] * r["chunks_per_report"], "/s")
        add("flood, daemon CPU", flood["cpu_pct"], "% of a core")
        add("flood, daemon CPU per report", flood["cpu_us_per_report"], "µs")
        add("flood, one GetStatus RPC meanwhile", flood["getstatus_s"] * 1e3, "ms")
        add("flood + WatchMetrics: reports/s ingested", watched["reports_per_s"], "/s")
        add("flood + WatchMetrics: reports/s the watcher got", watched["watched_per_s"], "/s")
        add("1 s interval, synced: daemon CPU", synced["cpu_pct"], "% of a core")
        add("1 s interval, synced: daemon CPU (schedstat)", synced["cpu_pct_schedstat"], "% of a core")
        add("1 s interval, synced: sends refused (EAGAIN)", sent["synced"]["refused"], "", MSMONITOR_RETRY)
        reports = sent["synced"]["reports"]
        add("1 s interval, synced: reports delayed > 5 ms", sent["synced"]["delayed"], f"of {reports}")
        add("1 s interval, synced: longest delay", sent["synced"]["max_delay_s"] * 1e3, "ms")
        add("1 s interval, spread: daemon CPU", spread["cpu_pct"], "% of a core")
        add("1 s interval, spread: sends refused (EAGAIN)", sent["spread"]["refused"])
        add(
            "1 s interval + WatchMetrics: reports/s the watcher got",
            w["synced_watched"]["watched_per_s"],
            f"/s of {n}",
        )
        add("datagrams sent, not received (all phases)", acc["datagrams_sent"] - acc["datagrams_received"])
        add("datagrams malformed (all phases)", acc["malformed"])
        add("RSS after the 1 s interval (VmRSS)", mem["synced"]["VmRSS"] / 1024, "MiB")
        add("RSS peak (VmHWM, at the end)", mem["end"]["VmHWM"] / 1024, "MiB")
        add("threads", mem["synced"]["Threads"])
        for key, d in r["deliveries"].items():
            dest = DESTINATIONS[key]
            add(f"{dest}: reports delivered", d["delivered"], f"of {d['produced']:.0f}")
            add(f"{dest}: reports dropped (the daemon's count)", d["dropped"])
            figs.append(Figure(f"{label}: {dest}: reports lost unseen", d["lost_unseen"], "", "<= 0"))
    figs += [Figure(f"in-process, per report: {k}", v, "µs") for k, v in emit.items()]
    return figs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=PROCESSES)
    parser.add_argument("--paced-seconds", type=float, default=10.0, help="CPU window at a 1 s interval")
    parser.add_argument("--flood-seconds", type=float, default=4.0, help="each back-to-back window")
    args = parser.parse_args()
    n = args.processes

    t0 = time.monotonic()
    runs = {
        "no sinks": run(False, args.paced_seconds, args.flood_seconds, n),
        "all sinks": run(True, args.paced_seconds, args.flood_seconds, n),
    }
    emit = in_process(2000)
    figures = figures_of(runs, emit, n)
    notes = [
        f"{n} sender processes, one {runs['no sinks']['report_bytes']}-byte report "
        f"({runs['no sinks']['chunks_per_report']} chunk) each; 1 s interval windows of "
        f"{args.paced_seconds:.0f} s (synced), {args.paced_seconds * 0.4:.0f} s (spread) and "
        f"{args.paced_seconds * 0.3:.0f} s (watched), flood windows of "
        f"{args.flood_seconds:.0f} s; {time.monotonic() - t0:.0f} s in all.",
        f"the daemon's socket queue: net.unix.max_dgram_qlen = {max_dgram_qlen()} datagrams.",
    ]
    for label, r in runs.items():
        notes.append(f"{label}: accounting {r['accounting']}")
        notes.append(
            f"{label}: daemon start {r['daemon_start_s']:.1f} s; torch loaded in the daemon: "
            f"{'yes' if r['torch_in_daemon'] else 'no'}"
        )
    report("monitor_daemon", figures, notes, {"runs": runs, "in_process_us": emit, "processes": n})
    return 0


def max_dgram_qlen() -> str:
    try:
        return Path("/proc/sys/net/unix/max_dgram_qlen").read_text().strip()
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
