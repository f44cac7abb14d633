"""Mutual TLS cost (issue 3): `dyno status` round trip over mTLS against plaintext, and full handshakes.

Real processes: one ``dynolog`` with ``--certs-dir`` (a set made by ``dynocerts.pki.init``, as ``dyno certs
init`` makes it) and one plaintext, both on loopback. The client is this process, with gRPC's Python API:

1. Round trip: ``GetStatus`` (what ``dyno status`` asks) on one warm channel, 2000 calls after 200 of
   warm-up; p50 and p99, TLS and plaintext, and the difference of the medians (what TLS adds to a call
   once connected, revocation and role check included).
2. Handshakes: a new channel per call (``grpc.use_local_subchannel_pool`` so no connection is shared,
   no TLS session cache: gRPC's default), then ``GetVersion``, then close; sequential from one client,
   and from 4 threads at once (connections per second the daemon accepts). The plaintext figure is the
   same loop without TLS: connection setup that is not TLS.

Both key types ``dyno certs init`` offers by default or for msMonitor compatibility are measured
(ec-p256, rsa3072). Client and daemon share this machine's cores, so these are lower bounds on what a
daemon serving remote clients accepts. Figures are not asserted.
"""

from __future__ import annotations

import concurrent.futures
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import grpc

from _bench import Figure, percentile, report, running_daemon
from dynocerts import pki
from dynocerts.keys import PasswordSource
from dynocerts.make import Terms
from dynocerts.tls import channel_credentials, load_client
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc

CALLS = 2000
WARMUP = 200
HANDSHAKES = 300
THREADS = 4
KEY_TYPES = ("ec-p256", "rsa3072")
FRESH = [("grpc.use_local_subchannel_pool", 1)]

Connect = Callable[[str], grpc.Channel]


def connector(creds: Optional[grpc.ChannelCredentials]) -> Connect:
    if creds is None:
        return lambda target: grpc.insecure_channel(target, options=FRESH)
    return lambda target: grpc.secure_channel(target, creds, options=FRESH)


def round_trips_us(connect: Connect, target: str) -> List[float]:
    with connect(target) as channel:
        stub = pb_grpc.DynologStub(channel)
        for _ in range(WARMUP):
            stub.GetStatus(pb.GetStatusRequest(), timeout=10)
        samples = []
        for _ in range(CALLS):
            t0 = time.perf_counter_ns()
            stub.GetStatus(pb.GetStatusRequest(), timeout=10)
            samples.append((time.perf_counter_ns() - t0) / 1000)
    return samples


def one_connection(connect: Connect, target: str) -> float:
    t0 = time.perf_counter_ns()
    with connect(target) as channel:
        pb_grpc.DynologStub(channel).GetVersion(pb.GetVersionRequest(), timeout=10)
    return (time.perf_counter_ns() - t0) / 1e6


def connections(connect: Connect, target: str, threads: int) -> Dict[str, float]:
    """Connections per second (new channel, one call, close), and the per-connection median in ms."""
    one_connection(connect, target)  # load the credentials' code paths once
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        times = list(pool.map(lambda _: one_connection(connect, target), range(HANDSHAKES)))
    elapsed = time.perf_counter() - t0
    return {"per_s": HANDSHAKES / elapsed, "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99)}


def measure(key_type: str, work: Path) -> Dict[str, Dict[str, float]]:
    root = work / key_type
    made = pki.init(root, ["localhost", "127.0.0.1"], "bench", Terms(key_type))
    creds = channel_credentials(load_client(made.client.directory, PasswordSource(prompt=False)))
    results: Dict[str, Dict[str, float]] = {}
    with running_daemon("--certs-dir", str(made.server.directory)) as tls, running_daemon() as plain:
        for name, connect, port in (
            ("tls", connector(creds), tls.port),
            ("plain", connector(None), plain.port),
        ):
            target = f"localhost:{port}"
            rtt = round_trips_us(connect, target)
            results[name] = {"rtt_p50_us": percentile(rtt, 50), "rtt_p99_us": percentile(rtt, 99)}
            for threads in (1, THREADS):
                for k, v in connections(connect, target, threads).items():
                    results[name][f"conn{threads}_{k}"] = v
    return results


def figures(key_type: str, r: Dict[str, Dict[str, float]]) -> List[Figure]:
    tls, plain = r["tls"], r["plain"]
    return [
        Figure(f"{key_type}: GetStatus round trip, mTLS, p50", tls["rtt_p50_us"], "µs"),
        Figure(f"{key_type}: GetStatus round trip, mTLS, p99", tls["rtt_p99_us"], "µs"),
        Figure(f"{key_type}: GetStatus round trip, plaintext, p50", plain["rtt_p50_us"], "µs"),
        Figure(f"{key_type}: GetStatus round trip, plaintext, p99", plain["rtt_p99_us"], "µs"),
        Figure(f"{key_type}: added by mTLS, p50", tls["rtt_p50_us"] - plain["rtt_p50_us"], "µs"),
        Figure(f"{key_type}: mTLS connections, 1 client", tls["conn1_per_s"], "/s"),
        Figure(f"{key_type}: mTLS connect + call, 1 client, p50", tls["conn1_p50_ms"], "ms"),
        Figure(f"{key_type}: mTLS connections, {THREADS} clients", tls[f"conn{THREADS}_per_s"], "/s"),
        Figure(f"{key_type}: plaintext connections, 1 client", plain["conn1_per_s"], "/s"),
        Figure(f"{key_type}: plaintext connections, {THREADS} clients", plain[f"conn{THREADS}_per_s"], "/s"),
    ]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="msmonitor-tls-bench-") as tmp:
        results = {key_type: measure(key_type, Path(tmp)) for key_type in KEY_TYPES}
    report(
        "tls",
        [f for key_type, r in results.items() for f in figures(key_type, r)],
        notes=[
            f"{CALLS} GetStatus calls on one warm channel after {WARMUP} of warm-up",
            f"{HANDSHAKES} connections per row: new channel, full TLS 1.3 handshake with client certificate, "
            "one GetVersion, close",
            "client and daemon share this machine's cores: figures are lower bounds",
        ],
        details=results,
    )


if __name__ == "__main__":
    main()
