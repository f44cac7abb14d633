"""Local IPC round trips through a real ``dynolog``: stock Kineto ``req`` polls and the daemon's replies.

Each client is what a stock PyTorch process is to the daemon: an ``AF_UNIX SOCK_DGRAM`` socket bound
to a pathname in the daemon's socket directory, sending a ``req`` (config type 3, job id, its pid and
parent pid) and waiting for the reply before sending the next — a round trip is from just before
``sendto`` to just after ``recv``. Pathname sockets in a temporary directory keep the benchmark off the
abstract ``@dynolog@`` name a real daemon on this machine may hold.

* 1 client, back to back, in this process: throughput and p50/p99 latency.
* 32 clients, each its own process (as 32 training processes would be), all polling back to back for the
  same window: p50/p99 over every round trip of every client and the total throughput.

Every loop is bounded in count and in time; every process started here is stopped on the way out.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import socket
import struct
import sys
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from _bench import Figure, cpu_seconds, report, running_daemon, summarize_ns
from msmonitor_contract import wire

REPLY_TIMEOUT_S = 1.0  # far beyond any healthy reply; a miss is counted, not waited on forever
MAX_ROUND_TRIPS = 1_000_000


@dataclass
class ClientResult:
    latencies_ns: array[int]
    elapsed_s: float
    timeouts: int
    bad_replies: int


def poll_loop(socket_dir: str, tag: str, duration_s: float, max_round_trips: int) -> ClientResult:
    """One Kineto-like client polling back to back for *duration_s* or *max_round_trips*."""
    daemon = str(wire.endpoint_address(wire.DAEMON_ENDPOINT, socket_dir))
    address = os.path.join(socket_dir, f"bench-{tag}-{os.getpid()}")
    request = wire.encode(wire.REQ, wire.KinetoRequest(3, 42, (os.getpid(), os.getppid())).pack())
    latencies = array("q")
    timeouts = bad = 0
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(address)
        sock.connect(daemon)
        # Kernel-side timeouts on a blocking socket: a sender waiting for room in the daemon's queue
        # (net.unix.max_dgram_qlen datagrams) sleeps as an exclusive waiter, woken one per datagram
        # the daemon reads. Python's settimeout() would instead poll() for POLLOUT, which wakes every
        # waiting client on every read (with 32 clients, a thundering herd that measures the kernel).
        timeval = struct.pack("@ll", int(REPLY_TIMEOUT_S), int(REPLY_TIMEOUT_S % 1 * 1e6))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        clock = time.perf_counter_ns
        send, recv, record = sock.send, sock.recv, latencies.append
        start = clock()
        deadline = start + int(duration_s * 1e9)
        for _ in range(max_round_trips):
            t0 = clock()
            if t0 > deadline:
                break
            try:
                send(request)
                reply = recv(wire.MAX_DATAGRAM)
            except BlockingIOError:  # SO_SNDTIMEO or SO_RCVTIMEO expired
                timeouts += 1
                continue
            record(clock() - t0)
            if reply[8:11] != b"req":  # the header's type field; the full check is in the unit tests
                bad += 1
        elapsed = (clock() - start) / 1e9
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)
    return ClientResult(latencies, elapsed, timeouts, bad)


def _worker(socket_dir: str, index: int, duration_s: float, start: Any, results: Any) -> None:
    """A client process: wait for the common start, poll, send the samples back."""
    try:
        start.wait()
        r = poll_loop(socket_dir, f"c{index}", duration_s, MAX_ROUND_TRIPS)
        results.put((index, (r.latencies_ns.tobytes(), r.elapsed_s, r.timeouts, r.bad_replies)))
    except Exception as exc:  # report, never hang the parent
        results.put((index, repr(exc)))


def run_concurrent(socket_dir: str, clients: int, duration_s: float) -> List[ClientResult]:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(clients + 1, timeout=60)  # every client ready, then all start together
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(socket_dir, i, duration_s, start, results), daemon=True)
        for i in range(clients)
    ]
    collected: Dict[int, Any] = {}
    try:
        for p in procs:
            p.start()
        start.wait()
        deadline = time.monotonic() + duration_s + 30
        while len(collected) < clients and time.monotonic() < deadline:
            try:
                index, payload = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            collected[index] = payload
    finally:
        start.abort()  # clients still waiting (if the start failed) leave at once
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    out: List[ClientResult] = []
    for i in range(clients):
        payload = collected.get(i)
        if not isinstance(payload, tuple):
            raise RuntimeError(f"client {i} failed: {payload or 'no result'}")
        raw, elapsed, timeouts, bad = payload
        lat = array("q")
        lat.frombytes(raw)
        out.append(ClientResult(lat, elapsed, timeouts, bad))
    return out


def max_dgram_qlen() -> str:
    try:
        return Path("/proc/sys/net/unix/max_dgram_qlen").read_text().strip()
    except OSError:
        return "?"


@contextlib.contextmanager
def pinned(daemon_pid: int, same: bool) -> Iterator[None]:
    """Pin this process and every daemon thread to one CPU (*same*) or to two different CPUs.

    Separates the daemon's own cost from the cost of waking a peer on another CPU, which on a virtual
    machine (an inter-processor interrupt, a halted vCPU to resume) can exceed the daemon's work. Unpinned,
    the scheduler picks either placement, so the unpinned figure is one of the two.
    """
    daemon_tasks = [int(t) for t in os.listdir(f"/proc/{daemon_pid}/task")]
    saved = {t: os.sched_getaffinity(t) for t in [0, *daemon_tasks]}
    cpus = sorted(saved[0])
    mine, theirs = cpus[0], cpus[0] if same or len(cpus) == 1 else cpus[1]
    try:
        os.sched_setaffinity(0, {mine})
        for t in daemon_tasks:
            os.sched_setaffinity(t, {theirs})
        yield
    finally:
        for t, mask in saved.items():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(t, mask)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each measured window")
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()

    with running_daemon() as daemon:
        assert daemon.proc is not None
        socket_dir = str(daemon.socket_dir)
        poll_loop(socket_dir, "warmup", 0.5, 2000)
        cpu0 = cpu_seconds(daemon.proc.pid)
        one = poll_loop(socket_dir, "solo", args.seconds, MAX_ROUND_TRIPS)
        cpu1 = cpu_seconds(daemon.proc.pid)
        many = run_concurrent(socket_dir, args.clients, args.seconds)
        cpu2 = cpu_seconds(daemon.proc.pid)
        placed: Dict[str, ClientResult] = {}
        for where in ("same", "other"):
            with pinned(daemon.proc.pid, same=where == "same"):
                placed[where] = poll_loop(socket_dir, where, args.seconds / 2, MAX_ROUND_TRIPS)
        counters = daemon.dyno_json("status").get("ipc", {})

    solo = summarize_ns(one.latencies_ns)
    solo_rate = solo["count"] / one.elapsed_s
    all_lat: List[int] = [x for r in many for x in r.latencies_ns]
    multi = summarize_ns(all_lat)
    window = max(r.elapsed_s for r in many)
    multi_rate = len(all_lat) / window
    placement = {k: {**summarize_ns(r.latencies_ns), "elapsed_s": r.elapsed_s} for k, r in placed.items()}
    for v in placement.values():
        v["rate_per_s"] = v["count"] / v["elapsed_s"]
    runs = [one, *placed.values(), *many]
    timeouts = sum(r.timeouts for r in runs)
    bad = sum(r.bad_replies for r in runs)
    per_client = [len(r.latencies_ns) for r in many]
    n = args.clients

    figures = [
        Figure("1 client: round trips per second", solo_rate, "/s", ">= 10000", "~98/s (10 ms sleep loop)"),
        Figure("1 client: round trip p50", solo["p50"] / 1e6, "ms", "<= 0.5", "~10 ms"),
        Figure("1 client: round trip p99", solo["p99"] / 1e6, "ms", "", "—"),
        Figure("  pinned, daemon's CPU: per second", placement["same"]["rate_per_s"], "/s", "", "—"),
        Figure("  pinned, daemon's CPU: p50", placement["same"]["p50"] / 1e6, "ms", "", "—"),
        Figure("  pinned, other CPU: per second", placement["other"]["rate_per_s"], "/s", "", "—"),
        Figure("  pinned, other CPU: p50", placement["other"]["p50"] / 1e6, "ms", "", "—"),
        Figure(f"{n} clients: total round trips per second", multi_rate, "/s", ">= 10000", "~98/s"),
        Figure(f"{n} clients: round trip p50", multi["p50"] / 1e6, "ms", "", "—"),
        Figure(f"{n} clients: round trip p99", multi["p99"] / 1e6, "ms", "<= 5", "~0.9 s"),
        Figure(f"{n} clients: round trip max", multi["max"] / 1e6, "ms", "", "—"),
    ]
    notes = [
        f"{args.seconds:.0f} s windows; {solo['count']} round trips with 1 client, {len(all_lat)} with {n} "
        f"(per client min {min(per_client)}, max {max(per_client)}); {timeouts} timeouts, {bad} bad replies.",
        f"daemon CPU: {(cpu1 - cpu0) / one.elapsed_s:.0%} of a core with 1 client, "
        f"{(cpu2 - cpu1) / window:.0%} with {n} (this machine has {os.cpu_count()} cores, shared with the "
        "clients).",
        "1 client is measured unpinned (as it runs for real), then pinned to the daemon's CPU and to the "
        "other CPU: unpinned lands on one or the other; the gap between them is the cost of waking a peer "
        "on another (virtual) CPU, not the daemon's work.",
        f"{n} clients: more than net.unix.max_dgram_qlen = {max_dgram_qlen()} datagrams waiting fills the "
        "daemon's queue; senders then sleep in the kernel until a slot frees (blocking send).",
        f"daemon counters after the run: {counters}",
        "C++ dynolog: one datagram per loop turn plus a 10 ms sleep (reference/dynolog.md §9), so ~100/s in "
        "total; 32 clients queue behind each other (the issue's ~0.9 s p99).",
    ]
    details: Dict[str, Optional[object]] = {
        "one_client": {**solo, "rate_per_s": solo_rate, "elapsed_s": one.elapsed_s},
        "one_client_pinned": placement,
        "many_clients": {**multi, "clients": n, "rate_per_s": multi_rate, "per_client": per_client},
        "timeouts": timeouts,
        "bad_replies": bad,
        "daemon_counters": counters,
    }
    report("ipc", figures, notes, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
