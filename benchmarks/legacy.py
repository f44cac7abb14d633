"""The legacy JSON RPC beside gRPC on one port (issue 21): what each costs, and what a flood of legacy
connections does to gRPC clients.

Real processes on loopback: a ``dynolog`` serving both (the default) and one with ``--legacy-rpc=off``
(gRPC bound to the port itself). The client is this process:

1. gRPC ``GetStatus`` on one warm channel, 2000 calls after 200 of warm-up, p50 and p99: relayed by the
   port (legacy on) and direct (off); the difference is what the relay adds to a call.
2. Legacy ``getStatus`` as both dyno binaries make it: a new TCP connection per request, the framed
   request in two writes, the reply read until the daemon closes; p50 and p99 of 2000, and requests per
   second from 1 and 4 client threads.
3. gRPC ``GetStatus`` p99 while the port is flooded from another process (at nice 19: it stands for
   other hosts, and takes only the CPU the daemon and the client leave): 10 000 connections held open
   silent, and 4 threads sending malformed and valid legacy requests as fast as they can. Goal: p99 <= 2x
   the unflooded p99. The same flood against ``--legacy-rpc=off`` (gRPC's own listener) for reference.

Client, flood and daemon share this machine's cores. Figures are not asserted.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from _bench import Figure, percentile, report, running_daemon
from tls import connector, round_trips_us

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import legacy_cli as cli  # the bytes the dyno binaries send

LEGACY_REQUESTS = 2000
THREADS = 4
HELD = 10_000  # the figure: far more than a node's users ever open
FLOOD_THREADS = 4


def grpc_round_trips_us(port: int) -> List[float]:
    """As benchmarks/tls.py measures a warm channel's GetStatus, plaintext."""
    return round_trips_us(connector(None), f"127.0.0.1:{port}")


def legacy_status_us(port: int) -> float:
    t0 = time.perf_counter_ns()
    reply = cli.send(port, cli.STATUS)
    assert reply is not None
    return (time.perf_counter_ns() - t0) / 1000


def legacy_rate(port: int, threads: int) -> float:
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: legacy_status_us(port), range(LEGACY_REQUESTS)))
    return LEGACY_REQUESTS / (time.perf_counter() - t0)


def _flood(port: int, stop: Any, filled: Any) -> None:
    """In a process of its own: silent connections held open, and a stream of requests good and bad."""
    import os
    import resource
    import threading

    # The flood stands for other hosts: at the lowest priority it takes only CPU the daemon and the
    # measured client leave, so what is measured is the daemon's handling, not two cores shared three ways.
    os.nice(19)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, HELD + 1000), hard))
    held: List[socket.socket] = []

    def hold() -> None:
        while not stop.is_set():
            held[:] = [s for s in held if s.fileno() != -1]
            while len(held) < HELD and not stop.is_set():
                try:
                    held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                except OSError:
                    break
            filled.set()
            time.sleep(0.5)

    def requests() -> None:
        bodies = [cli.frame(cli.STATUS), struct.pack("=i", -1), cli.frame(b"[" * 4000), cli.frame(b"{}")]
        i = 0
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                    sock.sendall(bodies[i % len(bodies)])
                    sock.shutdown(socket.SHUT_WR)
                    while sock.recv(65536):
                        pass
            except OSError:
                pass
            i += 1

    workers = [threading.Thread(target=hold)] + [
        threading.Thread(target=requests) for _ in range(FLOOD_THREADS)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for s in held:
        s.close()


def flooded_p99_us(port: int) -> float:
    stop, filled = multiprocessing.Event(), multiprocessing.Event()
    flood = multiprocessing.Process(target=_flood, args=(port, stop, filled))
    flood.start()
    try:
        filled.wait(120)  # every held connection open once
        return percentile(grpc_round_trips_us(port), 99)
    finally:
        stop.set()
        flood.join(30)


def main() -> None:
    unlimited = ("--legacy-connection-rate", "0")  # one client, measured as fast as it can go
    with running_daemon(*unlimited) as both, running_daemon("--legacy-rpc=off") as alone:
        relayed = grpc_round_trips_us(both.port)
        direct = grpc_round_trips_us(alone.port)
        legacy = [legacy_status_us(both.port) for _ in range(LEGACY_REQUESTS)]
        rates: Dict[int, float] = {n: legacy_rate(both.port, n) for n in (1, THREADS)}
    with running_daemon() as flooded:  # the legacy connection limit as shipped
        calm_p99 = percentile(grpc_round_trips_us(flooded.port), 99)
        flood_p99 = flooded_p99_us(flooded.port)
    with running_daemon("--legacy-rpc=off") as alone:  # the same bytes, to gRPC's own listener
        off_calm_p99 = percentile(grpc_round_trips_us(alone.port), 99)
        off_flood_p99 = flooded_p99_us(alone.port)
    figures = [
        Figure("gRPC GetStatus, relayed by the port, p50", percentile(relayed, 50), "µs"),
        Figure("gRPC GetStatus, relayed by the port, p99", percentile(relayed, 99), "µs"),
        Figure("gRPC GetStatus, --legacy-rpc=off, p50", percentile(direct, 50), "µs"),
        Figure("gRPC GetStatus, --legacy-rpc=off, p99", percentile(direct, 99), "µs"),
        Figure("added by the relay, p50", percentile(relayed, 50) - percentile(direct, 50), "µs"),
        Figure("legacy getStatus (connect, ask, close), p50", percentile(legacy, 50), "µs"),
        Figure("legacy getStatus (connect, ask, close), p99", percentile(legacy, 99), "µs"),
        Figure("legacy getStatus, 1 client", rates[1], "/s"),
        Figure(f"legacy getStatus, {THREADS} clients", rates[THREADS], "/s"),
        Figure("gRPC GetStatus p99, port not flooded", calm_p99, "µs"),
        Figure("gRPC GetStatus p99, legacy flood", flood_p99, "µs"),
        Figure("flooded p99 / unflooded p99", flood_p99 / calm_p99, "x", "<= 2"),
        Figure("--legacy-rpc=off: gRPC GetStatus p99, not flooded", off_calm_p99, "µs"),
        Figure("--legacy-rpc=off: gRPC GetStatus p99, the same flood", off_flood_p99, "µs"),
    ]
    report(
        "legacy",
        figures,
        [
            f"flood: {HELD} silent connections held, {FLOOD_THREADS} threads of good and bad legacy "
            "requests, from a process at nice 19 (standing for other hosts)",
            "legacy requests open a connection each, as dynolog's and msMonitor's dyno do",
        ],
    )


if __name__ == "__main__":
    main()
