"""Per-client limits of the gRPC server: the token bucket and stream count as pure logic, then a real
`dynolog` under mutual TLS refusing one client with RESOURCE_EXHAUSTED while another is served."""

from __future__ import annotations

import queue
import re
import time
from typing import Callable, Iterator, List, Optional, Tuple

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from conftest import Authority, Dirs, credentials
from dynocerts.make import Issued
from dynolog.config import parse_args
from dynolog.edge import limits
from dynolog.edge.limits import Client, ClientLimiter, Limits, TokenBucket, peer_host
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, wait_until

ALICE = Client("cn:alice", "'alice'")
BOB = Client("cn:bob", "'bob'")
GET = "/dynolog.v1.Dynolog/GetVersion"
WATCH = "/dynolog.v1.Dynolog/WatchMetrics"
RATE_REFUSAL = re.compile(
    r"rate limit: more than 2 requests/s \(bursts of 3\) from client (?P<client>.+) "
    r"\(--client-rate-limit, --client-rate-burst\); retry in \d+ ms"
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- the logic ------------------------------------------------------------------------------------


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    bucket = TokenBucket.full(rate=2, capacity=3, now=0)
    assert [bucket.take(0) for _ in range(4)] == [True, True, True, False]
    assert bucket.wait_s() == pytest.approx(0.5)
    assert not bucket.take(0.49)
    assert bucket.take(0.5)
    assert bucket.is_full(100) and bucket.tokens == 3  # refills up to the burst, never beyond


def test_limiter_refuses_one_client_and_serves_another() -> None:
    clock = Clock()
    limiter = ClientLimiter(Limits(rate=2, burst=3, streams=0), clock)
    assert [limiter.admit(ALICE, GET, False) for _ in range(3)] == [None, None, None]
    refusal = limiter.admit(ALICE, GET, False)
    assert refusal == (
        "rate limit: more than 2 requests/s (bursts of 3) from client 'alice' "
        "(--client-rate-limit, --client-rate-burst); retry in 500 ms"
    )
    assert limiter.admit(BOB, GET, False) is None
    clock.now += 0.5
    assert limiter.admit(ALICE, GET, False) is None


def test_limiter_caps_open_streams_until_one_is_released() -> None:
    limiter = ClientLimiter(Limits(rate=0, burst=1, streams=2), Clock())
    assert [limiter.admit(ALICE, WATCH, True) for _ in range(2)] == [None, None]
    assert limiter.admit(ALICE, GET, False) is None  # unary calls hold no stream slot
    assert limiter.admit(ALICE, WATCH, True) == (
        "stream limit: more than 2 concurrent streams from client 'alice' (--max-client-streams); "
        "end one first"
    )
    assert limiter.admit(BOB, WATCH, True) is None
    limiter.release(ALICE)
    assert limiter.admit(ALICE, WATCH, True) is None  # the one slot released, and only that one
    assert (limiter.admit(ALICE, WATCH, True) or "").startswith("stream limit")


def test_zero_is_unlimited() -> None:
    assert not Limits(rate=0, burst=1, streams=0).enabled
    limiter = ClientLimiter(Limits(rate=0, burst=1, streams=0), Clock())
    assert all(limiter.admit(ALICE, WATCH, True) is None for _ in range(10_000))


def test_idle_clients_are_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_TRACKED", 4)
    clock = Clock()
    limiter = ClientLimiter(Limits(rate=10, burst=1, streams=5), clock)
    limiter.admit(ALICE, WATCH, True)  # holds a stream: remembered however long it stays open
    for n in range(20):
        clock.now += 1.0  # every earlier address has refilled its bucket by now
        assert limiter.admit(Client(f"ip:10.0.0.{n}", f"at 10.0.0.{n}"), GET, False) is None
    assert limiter.tracked() <= 4
    for _ in range(4):  # Alice's open stream is still counted: 4 more make her limit of 5
        clock.now += 1.0
        assert limiter.admit(ALICE, WATCH, True) is None
    clock.now += 1.0
    assert (limiter.admit(ALICE, WATCH, True) or "").startswith("stream limit")


def test_refusals_are_logged_once_a_minute_per_client(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    limiter = ClientLimiter(Limits(rate=1, burst=1, streams=0), clock)
    limiter.admit(ALICE, GET, False)
    for _ in range(5):
        limiter.admit(ALICE, GET, False)
    clock.now += limits.REPORT_EVERY_S
    limiter.admit(ALICE, GET, False)  # takes the refilled token
    limiter.admit(ALICE, GET, False)
    lines = [r.getMessage() for r in caplog.records if r.name == "dynolog.edge.limits"]
    assert len(lines) == 2
    assert lines[0].startswith(f"refused {GET}: rate limit: ")
    assert lines[1].endswith("(4 more refused since the last report)")


@pytest.mark.parametrize(
    "peer, host",
    [
        ("ipv4:10.0.0.7:51234", "10.0.0.7"),
        ("ipv6:[::1]:51234", "::1"),
        ("ipv6:%5B::1%5D:51234", "::1"),
        ("unix:/run/dynolog.sock", "/run/dynolog.sock"),
    ],
)
def test_a_client_without_certificate_is_its_address(peer: str, host: str) -> None:
    assert peer_host(peer) == host


def test_flags_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_args([])
    assert (config.client_rate_limit, config.client_rate_burst, config.max_client_streams) == (200, 1000, 64)
    unlimited = parse_args(["--client-rate-limit", "0", "--max-client-streams", "0"])
    assert not Limits(unlimited.client_rate_limit, 1, unlimited.max_client_streams).enabled
    for bad in (["--client-rate-limit", "-1"], ["--client-rate-burst", "0"], ["--max-client-streams", "x"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
    refused = capsys.readouterr().err
    assert "--max_client_streams: must be a whole number >= 0 (0: unlimited), got x" in refused


# --- a real daemon under mutual TLS ---------------------------------------------------------------


def channel(d: Daemon, authority: Authority, who: Issued) -> grpc.Channel:
    return grpc.secure_channel(f"localhost:{d.port}", credentials(authority.ca, who))


def calls_until_refused(stub: pb_grpc.DynologStub) -> Tuple[int, grpc.RpcError]:
    for answered in range(100):
        try:
            stub.GetVersion(pb.GetVersionRequest(), timeout=10)
        except grpc.RpcError as exc:
            return answered, exc
    raise AssertionError("100 calls in a row were answered")


def answers(stub: pb_grpc.DynologStub) -> bool:
    try:
        stub.GetVersion(pb.GetVersionRequest(), timeout=10)
    except grpc.RpcError as exc:
        assert exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, exc
        return False
    return True


def test_rate_limit_refuses_the_client_over_it_and_only_until_its_bucket_refills(
    start_daemon: Callable[..., Daemon], dirs: Dirs, authority: Authority
) -> None:
    d = start_daemon("--certs-dir", str(dirs.server), "--client-rate-limit", "2", "--client-rate-burst", "3")
    with channel(d, authority, authority.alice) as alice_ch, channel(d, authority, authority.bob) as bob_ch:
        alice, bob = pb_grpc.DynologStub(alice_ch), pb_grpc.DynologStub(bob_ch)
        started = time.monotonic()
        answered, refused = calls_until_refused(alice)
        # The burst, plus what refilled at 2/s while the calls were made.
        assert 3 <= answered <= 3 + 2 * (time.monotonic() - started) + 1
        assert refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        match = RATE_REFUSAL.fullmatch(refused.details() or "")
        assert match is not None and match["client"] == "'alice'", refused.details()
        assert answers(bob)  # another certificate, another bucket
        wait_until(lambda: answers(alice), timeout=10, what="alice's bucket to refill")
    wait_until(
        lambda: (
            "WARNING dynolog.edge.limits: refused /dynolog.v1.Dynolog/GetVersion: rate limit: more than 2 "
            "requests/s (bursts of 3) from client 'alice'" in d.log_file.read_text()
        ),
        what="the refusal in the daemon's log",
    )


def test_plaintext_clients_are_told_apart_by_address(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon("--client-rate-limit", "0.01", "--client-rate-burst", "1")
    d.dyno("status", expect=0)
    result = d.dyno("status")
    assert result.returncode == 1
    prefix = (
        f"dyno: dynolog at localhost:{d.port} answered RESOURCE_EXHAUSTED: rate limit: more than 0.01 "
        "requests/s (bursts of 1) from client at 127.0.0.1 (--client-rate-limit, --client-rate-burst); "
        "retry in "
    )
    assert result.stderr.startswith(prefix), result.stderr


class Streams:
    """Streams of one channel, each open once its first reply arrived; all ended at exit."""

    def __init__(self, ch: grpc.Channel) -> None:
        self.ch = ch
        self.open: List[grpc.Future] = []
        self._requests: queue.Queue[Optional[reflection_pb2.ServerReflectionRequest]] = queue.Queue()

    def watch(self) -> Optional[grpc.RpcError]:
        """A health Watch (server streaming): None once it answered, else why it was refused."""
        call = health_pb2_grpc.HealthStub(self.ch).Watch(health_pb2.HealthCheckRequest(), timeout=60)
        return self._first_reply(call)

    def reflection(self) -> Optional[grpc.RpcError]:
        """Server reflection (bidirectional), kept open by a request iterator that waits."""
        call = reflection_pb2_grpc.ServerReflectionStub(self.ch).ServerReflectionInfo(
            self._pending(), timeout=60
        )
        self._requests.put(reflection_pb2.ServerReflectionRequest(list_services=""))
        return self._first_reply(call)

    def silent(self, call: grpc.Future) -> None:
        """A stream that answers nothing until something happens (WatchMetrics without processes)."""
        self.open.append(call)

    def _pending(self) -> Iterator[reflection_pb2.ServerReflectionRequest]:
        while (request := self._requests.get()) is not None:
            yield request

    def _first_reply(self, call: grpc.Future) -> Optional[grpc.RpcError]:
        try:
            next(call)  # type: ignore[call-overload]
        except grpc.RpcError as exc:
            return exc
        self.open.append(call)
        return None

    def __enter__(self) -> Streams:
        return self

    def __exit__(self, *exc: object) -> None:
        self._requests.put(None)
        for call in self.open:
            call.cancel()


def test_stream_cap_refuses_one_more_and_admits_again_once_one_ends(
    start_daemon: Callable[..., Daemon], dirs: Dirs, authority: Authority
) -> None:
    d = start_daemon("--certs-dir", str(dirs.server), "--max-client-streams", "3")
    with channel(d, authority, authority.alice) as ch, Streams(ch) as alice:
        metrics = pb_grpc.DynologStub(ch).WatchMetrics(pb.WatchMetricsRequest(), timeout=60)
        alice.silent(metrics)
        assert alice.reflection() is None
        assert alice.watch() is None
        # WatchMetrics answers nothing to show it is open, but the daemon took it before the two after it.
        refused = alice.watch()
        assert refused is not None and refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.details() == (
            "stream limit: more than 3 concurrent streams from client 'alice' (--max-client-streams); "
            "end one first"
        )
        assert pb_grpc.DynologStub(ch).GetVersion(pb.GetVersionRequest(), timeout=10).version  # unary: fine
        with channel(d, authority, authority.bob) as bob_ch, Streams(bob_ch) as bob:
            assert bob.watch() is None  # bob's streams are his own
        metrics.cancel()
        wait_until(lambda: alice.watch() is None, what="a stream to be admitted once one ended")
