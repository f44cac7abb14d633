"""The port under a local sender without a certificate (issue 34, items 1-3): connections that never
finish their TLS handshake, ClientHellos cut into one-byte records, and sources rotated through
127.0.0.0/8. Each attack runs against the real daemon; the bound it meets is asserted, and a real
client is served throughout. The census's own rules are checked beside it."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import types
from typing import Callable, Iterator, List, Tuple

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import legacy_cli as cli
import port_attacks as attack
from conftest import Authority, Dirs, credentials, status
from dynolog.edge.limits import Limits
from dynolog.edge.port.census import Bound, Census, Stage
from dynolog.edge.port.gate import Gate
from dynolog.edge.port.listener import BOUNDS, HANDSHAKE_TIMEOUT_S
from dynolog.edge.port.relay import Handshake
from dynolog.edge.port.sniff import MAX_SNIFFED, Sniffer
from dynolog.edge.port.sources import Sources, local_user, remote_source
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, stop_process, wait_until

FLOOD = 3000
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
# Connects from argv[1] to 127.0.0.1:argv[2] and holds the connection until its stdin closes.
CONNECT_AND_WAIT = (
    "import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); "
    "s.connect(('127.0.0.1', int(sys.argv[2]))); sys.stdin.read()"
)
WAITING, HELLO, FINISHING = BOUNDS[Stage.WAITING], BOUNDS[Stage.HELLO], BOUNDS[Stage.FINISHING]
MARGIN = 32  # descriptors the daemon may open for its own reasons meanwhile


@pytest.fixture
def alice(authority: Authority) -> grpc.ChannelCredentials:
    return credentials(authority.ca, authority.alice)


@pytest.fixture
def open_files() -> Iterator[None]:
    """This process may hold a flood's sockets: its soft open files limit raised for the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < FLOOD + 256:
        pytest.skip(f"a flood of {FLOOD} connections needs an open files limit above {FLOOD + 256}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, FLOOD + 256), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@contextlib.contextmanager
def watching(daemon: Daemon, creds: grpc.ChannelCredentials) -> Iterator[grpc.Future]:
    """A health Watch stream held open on its own connection: it ends if that connection is closed."""
    with grpc.secure_channel(f"localhost:{daemon.port}", creds) as channel:
        call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), timeout=120)
        assert next(call).status == health_pb2.HealthCheckResponse.SERVING
        yield call
        call.cancel()


def descriptors_settle(daemon: Daemon, at_most: int) -> int:
    assert daemon.proc is not None
    pid = daemon.proc.pid
    return wait_until(lambda: (lambda n: n if n <= at_most else None)(attack.open_descriptors(pid)))


def test_unfinished_handshakes_cost_a_bounded_number_of_descriptors_and_memory(
    start_daemon: Callable, dirs: Dirs, alice: grpc.ChannelCredentials, open_files: None
) -> None:
    # The new-connection gate off: the bounds on connections held are what this holds to.
    tls_daemon = start_daemon("--certs-dir", str(dirs.server), "--tls-handshake-rate", "0")
    assert tls_daemon.proc is not None
    pid = tls_daemon.proc.pid
    status(tls_daemon, alice)
    with watching(tls_daemon, alice) as stream:
        before, rss_before = attack.open_descriptors(pid), attack.rss_mb(pid)
        with attack.held(tls_daemon.port, FLOOD, attack.client_hello(["h2"])) as held:
            assert len(held) == FLOOD
            # Three descriptors per unfinished handshake (the client's, the relay's, gRPC's), at most
            # HELLO.per_source of them from one source, and some not yet read; 3 * FLOOD before.
            bound = before + 3 * HELLO.per_source + WAITING.per_source
            assert attack.open_descriptors(pid) <= bound
            assert status(tls_daemon, alice).version  # a new client is served meanwhile
            assert stream.is_active()  # and one past its handshake is never closed for the flood
        assert descriptors_settle(tls_daemon, before + 2) <= before + 2
    # The flood's memory is given back (about 70 KB a connection stayed before: 200 MB for this one).
    assert wait_until(lambda: attack.rss_mb(pid) <= rss_before + 48, what="memory given back")
    log = tls_daemon.log_file.read_text()
    assert (
        f"connections silent since their TLS ClientHello for newer ones: at most {HELLO.total} may be" in log
    )


def test_an_encrypted_record_sent_before_the_server_spoke_does_not_pass_for_a_finished_handshake(
    start_daemon: Callable, dirs: Dirs, alice: grpc.ChannelCredentials
) -> None:
    # A ClientHello and, in the same send, the header of an application-data record whose body never
    # comes: were it taken for the client's Finished, the server's first flight would mark each one
    # served, beyond every cap, held until gRPC's own 15 s.
    daemon = start_daemon("--certs-dir", str(dirs.server), "--tls-handshake-rate", "0")
    assert daemon.proc is not None
    before = attack.open_descriptors(daemon.proc.pid)
    lying = attack.client_hello(["h2"]) + b"\x17\x03\x03\x40\x00"
    with attack.held(daemon.port, 400, lying) as held:
        assert len(held) == 400
        wait_until(
            lambda: (
                "connections silent since their TLS ClientHello for newer ones" in daemon.log_file.read_text()
            )
        )
        bound = before + 3 * (HELLO.per_source + FINISHING.per_source) + WAITING.per_source
        assert attack.open_descriptors(daemon.proc.pid) <= bound
        assert status(daemon, alice).version


def test_plaintext_grpc_to_a_mutual_tls_daemon_is_closed_at_once(
    tls_daemon: Daemon, alice: grpc.ChannelCredentials
) -> None:
    with contextlib.closing(attack.connect(tls_daemon.port)) as sock:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        assert attack.closed_by_peer(sock, 2.0)
    wait_until(
        lambda: "refused a plaintext gRPC connection from 127.0.0.1" in tls_daemon.log_file.read_text()
    )
    assert status(tls_daemon, alice).version


def test_a_handshake_not_finished_in_time_is_closed(
    tls_daemon: Daemon, alice: grpc.ChannelCredentials
) -> None:
    with attack.held(tls_daemon.port, 3, attack.client_hello(["h2"])) as held:
        # gRPC's own deadline is 120 s; the port closes it, and the relay's descriptors, sooner.
        assert all(attack.closed_by_peer(sock, HANDSHAKE_TIMEOUT_S + 5) for sock in held)
    assert status(tls_daemon, alice).version
    wait_until(
        lambda: (
            f"connections silent since their TLS ClientHello for more than {HANDSHAKE_TIMEOUT_S:g} s"
            in tls_daemon.log_file.read_text()
        )
    )


def test_a_client_hello_past_the_byte_cap_is_closed_at_once(
    tls_daemon: Daemon, alice: grpc.ChannelCredentials
) -> None:
    # A ClientHello announced at 16 000 bytes, in one-byte records: the port stops reading at its
    # cap, long before the 3 s a silent connection is given.
    endless = attack.endless_client_hello(MAX_SNIFFED + 6)
    with contextlib.closing(attack.connect(tls_daemon.port)) as sock:
        sock.sendall(endless)
        assert attack.closed_by_peer(sock, 2.0)
    assert status(tls_daemon, alice).version


def test_silent_connections_from_rotating_loopback_addresses_share_one_cap(start_daemon: Callable) -> None:
    daemon = start_daemon()
    assert daemon.proc is not None
    before = attack.open_descriptors(daemon.proc.pid)
    with attack.held(daemon.port, 2 * WAITING.per_source, sources=200) as held:
        assert len(held) == 2 * WAITING.per_source
        # One source, loopback: its cap, not one per address (before: all 512 held).
        assert attack.open_descriptors(daemon.proc.pid) <= before + WAITING.per_source + MARGIN
        with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
            assert pb_grpc.DynologStub(channel).GetStatus(pb.GetStatusRequest(), timeout=10).version


def test_legacy_connections_from_rotating_loopback_addresses_share_one_allowance(
    start_daemon: Callable,
) -> None:
    daemon = start_daemon("--legacy-connection-rate", "0.01", "--legacy-connection-burst", "5")
    answered: List[bool] = []
    for i in range(20):
        with contextlib.closing(attack.connect(daemon.port, attack.loopback_source(i))) as sock:
            sock.sendall(cli.frame(cli.STATUS))
            answered.append(bool(sock.recv(1 << 16)))
    assert answered == [True] * 5 + [False] * 15
    wait_until(lambda: f"from client at 127.0.0.7 (local uid {os.geteuid()})" in daemon.log_file.read_text())


def test_new_tls_connections_over_a_senders_rate_are_closed_before_their_handshake(
    start_daemon: Callable, dirs: Dirs, alice: grpc.ChannelCredentials
) -> None:
    daemon = start_daemon(
        "--certs-dir", str(dirs.server), "--tls-handshake-rate", "0.01", "--tls-handshake-burst", "3"
    )
    for _ in range(3):
        assert status(daemon, alice).version
    with pytest.raises(grpc.RpcError) as refused:
        status(daemon, alice)
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    wait_until(
        lambda: (
            f"refused a TLS connection: rate limit: more than 0.01 requests/s (bursts of 3) from "
            f"client at 127.0.0.1 (local uid {os.geteuid()}) (--tls-handshake-rate, --tls-handshake-burst)"
            in daemon.log_file.read_text()
        )
    )


# --- the census's rules -------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def census(budget: int = 100) -> Census:
    return Census({Stage.WAITING: Bound(2, 3, 1.0), Stage.HELLO: Bound(2, 3, 5.0)}, budget, Clock())


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="root and setpriv(1)")
def test_a_local_sender_is_its_user_whatever_address_it_sends_from() -> None:
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(contextlib.closing(socket.create_server(("127.0.0.1", 0))))
        port = server.getsockname()[1]
        sender = subprocess.Popen(
            [*AS_NOBODY, sys.executable, "-c", CONNECT_AND_WAIT, "127.0.0.5", str(port)],
            stdin=subprocess.PIPE,
        )
        stack.callback(stop_process, sender)
        theirs, their_address = server.accept()
        stack.enter_context(contextlib.closing(theirs))
        stack.enter_context(contextlib.closing(attack.connect(port, "127.0.0.9")))
        mine, my_address = server.accept()
        stack.enter_context(contextlib.closing(mine))
        sources = Sources()
        stack.callback(sources.close)
        assert sources.of(theirs, their_address) == local_user(NOBODY)
        assert sources.of(mine, my_address) == local_user(os.geteuid())


def test_a_remote_sender_is_its_address_or_its_ipv6_64() -> None:
    assert remote_source("10.0.0.7") == "10.0.0.7"
    assert remote_source("2001:db8::1") == remote_source("2001:db8::ffff:1") == "2001:db8::/64"
    assert remote_source("fe80::1%eth0") == "fe80::/64"


def test_a_new_connection_over_a_cap_closes_the_oldest_of_its_source_then_of_all() -> None:
    c = census()
    closed: List[str] = []
    entries = {
        n: c.admit(Stage.WAITING, host, lambda n=n: closed.append(n))
        for n, host in (("a1", "10.0.0.1"), ("a2", "10.0.0.1"), ("b1", "10.0.0.2"))
    }
    assert all(entries.values()) and closed == []
    c.admit(Stage.WAITING, "10.0.0.1", lambda: closed.append("a3"))  # a's cap of 2: a1 goes
    assert closed == ["a1"]
    c.admit(Stage.WAITING, "10.0.0.3", lambda: closed.append("c1"))  # 3 in all: the oldest, a2
    assert closed == ["a1", "a2"] and c.held(Stage.WAITING) == 3


def test_a_served_connection_is_never_closed_for_another_and_the_budget_is_kept() -> None:
    c = census(budget=2)
    closed: List[str] = []
    served = c.admit(Stage.WAITING, "10.0.0.1", lambda: closed.append("served"))
    assert served is not None
    c.advance(served, Stage.HELLO)
    c.advance(served, Stage.SERVED)
    c.admit(Stage.WAITING, "10.0.0.1", lambda: closed.append("waiting"))
    assert c.admit(Stage.WAITING, "10.0.0.2", lambda: closed.append("new")) is not None  # waiting closed
    assert closed == ["waiting"]
    c.leave(served)
    c.leave(served)  # twice is harmless
    assert len(c) == 1


def test_the_sweep_closes_those_past_their_stage_deadline() -> None:
    clock = Clock()
    c = Census({Stage.WAITING: Bound(9, 9, 1.0), Stage.HELLO: Bound(9, 9, 5.0)}, 100, clock)
    closed: List[str] = []
    waiting = c.admit(Stage.WAITING, "h", lambda: closed.append("waiting"))
    shaking = c.admit(Stage.WAITING, "h", lambda: closed.append("handshaking"))
    assert waiting is not None and shaking is not None
    c.advance(shaking, Stage.HELLO)
    clock.now = 2.0
    c.sweep()
    assert closed == ["waiting"]
    clock.now = 5.5
    c.sweep()
    assert closed == ["waiting", "handshaking"] and len(c) == 0
    assert c.closed_any() and c.closed().timed_out == {Stage.WAITING: 1, Stage.HELLO: 1}
    assert not c.closed_any()


# --- a relayed handshake, told from the outside -------------------------------------------------------


def contexts(dirs: Dirs, version: ssl.TLSVersion, client_cert: bool) -> Tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(dirs.server.cert, dirs.server.key)
    server.load_verify_locations(dirs.server.ca)
    server.verify_mode = ssl.CERT_REQUIRED
    server.maximum_version = version
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(dirs.alice.ca)
    if client_cert:
        client.load_cert_chain(dirs.alice.cert, dirs.alice.key)
    return server, client


def relayed(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> List[Stage]:
    """A real TLS session between two memory-backed ends, every byte between them shown to a
    Handshake as the relay shows it; the stages it advanced to, in order."""
    stages: List[Stage] = []
    watch = Handshake(stages.append)
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_out, client_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(to_server, server_out, server_side=True)
    client = client_ctx.wrap_bio(to_client, client_out, server_hostname="localhost")

    def pump() -> None:
        sent = client_out.read()
        if sent:
            watch.from_client(sent)
            to_server.write(sent)
        answered = server_out.read()
        if answered:
            watch.from_server(answered)
            to_client.write(answered)

    for _ in range(10):  # each side's handshake as far as the other's bytes take it
        for end in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLError):
                end.do_handshake()
        pump()
    with contextlib.suppress(ssl.SSLError):
        client.write(b"PRI * HTTP/2.0")  # what gRPC sends first, and the server's answer
        pump()
        server.read(64)
        server.write(b"settings")
        pump()
    return stages


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2])
def test_a_handshake_is_finishing_when_the_client_answers_and_served_once_the_server_speaks_after(
    dirs: Dirs, version: ssl.TLSVersion
) -> None:
    assert relayed(*contexts(dirs, version, client_cert=True)) == [Stage.FINISHING, Stage.SERVED]


def test_a_client_without_a_certificate_never_looks_served_before_it_is_closed(dirs: Dirs) -> None:
    # TLS 1.2: the server refuses in its second flight, before any application data.
    assert Stage.SERVED not in relayed(*contexts(dirs, ssl.TLSVersion.TLSv1_2, client_cert=False))


def test_what_a_client_sent_before_the_server_spoke_proves_nothing() -> None:
    stages: List[Stage] = []
    watch = Handshake(stages.append)
    watch.from_client(attack.client_hello(["h2"]) + b"\x17\x03\x03\x00\x01x")  # whole, but too soon
    watch.from_server(b"the server's first flight")
    watch.from_server(b"the rest of it")
    assert stages == []
    watch.from_client(b"\x17\x03\x03\x40\x00")  # after the flight, but never whole
    watch.from_server(b"an alert, say")
    assert stages == [Stage.FINISHING]
    watch.from_client(b"\x00" * 0x4000)  # whole now; the server's next word is after it
    assert stages == [Stage.FINISHING]
    watch.from_server(b"settings")
    assert stages == [Stage.FINISHING, Stage.SERVED]


def test_a_client_gone_before_its_connection_is_accepted_is_nobodys() -> None:
    with contextlib.closing(socket.create_server(("127.0.0.1", 0))) as server:
        client = attack.connect(server.getsockname()[1])
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # reset: its end is gone before the accept
        conn, address = server.accept()
        sources = Sources()
        with contextlib.closing(conn):
            assert sources.of(conn, address) is None  # reset unread, charged to no one (not root)
        sources.close()


def test_past_the_shared_bucket_only_light_senders_are_let_in() -> None:
    gate = Gate(Limits(rate=0.001, burst=4, streams=0), "a TLS connection")  # all senders: 16 at once

    def arrival(sender: str) -> object:
        return types.SimpleNamespace(host=sender, source=sender)

    heavy = [f"10.0.0.{i}" for i in range(4)]
    assert all(gate.admit(arrival(h)) for h in heavy for _ in range(4))  # the shared 16, used up
    assert not gate.admit(arrival(heavy[0]))  # its own burst is spent
    assert gate.admit(arrival("10.0.0.9"))  # light: 3 of its 4 left
    assert gate.admit(arrival("10.0.0.9"))  # 2 of 4: still half
    assert not gate.admit(arrival("10.0.0.9"))  # now heavy, and the shared bucket is empty


def test_each_record_of_a_client_hello_cut_into_one_byte_records_is_read_once() -> None:
    """Item 2: before, every arrival re-read all the records so far (quadratic). A count of the bytes
    the sniffer looks up, fed one byte at a time: a few for each byte, however many came before."""
    data = attack.in_records_of(attack.client_hello(["h2"]), 1)
    sniffer = Sniffer()
    sniffer.data = Counted()
    for i in range(len(data)):
        sniffer.feed(data[i : i + 1])
    assert sniffer.data.lookups <= 6 * len(data), (sniffer.data.lookups, len(data))


class Counted(bytearray):
    lookups = 0

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        self.lookups += 1
        return super().__getitem__(index)
