"""Whatever arrives on the IPC, the daemon drops what does not parse, counts it, and keeps serving."""

from __future__ import annotations

import json
import os
import socket
import struct

from dynolog.core.traces import MAX_TRACES
from harness import Daemon, wait_until
from msmonitor_contract import wire
from msmonitor_contract.vocabulary import TracePhase

GARBAGE = [
    b"",  # empty datagram
    b"\x01" * 10,  # shorter than the header
    struct.pack("=Q32s", 10_000_000, b"req") + b"x",  # size that lies (huge)
    struct.pack("=Q32s", 0, b"req") + b"extra",  # size that lies (small)
    wire.encode(wire.REQ, struct.pack("=iiq", 3, 1 << 30, 0) + b"\x01\x00\x00\x00"),  # huge pid count
    wire.encode(wire.REQ, struct.pack("=iiq", 3, 0, 0)),  # zero pids
    wire.encode(wire.REQ, struct.pack("=iiq", 3, 4, 0) + struct.pack("=i", 1)),  # count beyond payload
    wire.encode(wire.CTXT, b"\x00" * 3),  # short ctxt
    wire.encode("no-such-type", b"{}"),  # unknown type
    wire.encode(wire.HELLO, b"{not json"),
    wire.encode(wire.HELLO, b'{"pid": "one"}'),
    wire.encode(wire.HELLO, b"[" * 50_000),  # nesting bomb
    wire.encode(wire.HELLO, b'{"pid": 1, "rank": 1099511627776}'),  # beyond the int32 it ends up in
    struct.pack("=Q", 0) + b"r" * 32,  # type without NUL
    b"\x00" * (wire.MAX_DATAGRAM + 100),  # larger than the receive buffer: truncated
]


class Client:
    """A Kineto-style peer: its own pathname socket, polling with `req` and reading the reply."""

    def __init__(self, daemon: Daemon, name: str) -> None:
        self.path = str(daemon.socket_dir / name)
        self.daemon_path = str(daemon.socket_dir / wire.DAEMON_ENDPOINT)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * wire.MAX_DATAGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(5)

    def send(self, data: bytes) -> None:
        self.sock.sendto(data, self.daemon_path)

    def poll(self) -> wire.Datagram:
        self.send(wire.encode(wire.REQ, wire.KinetoRequest(3, 0, (os.getpid(), os.getppid())).pack()))
        data, sender = self.sock.recvfrom(wire.MAX_DATAGRAM)
        assert sender == self.daemon_path, "replies must come from the daemon's bound socket"
        return wire.decode(data)

    def close(self) -> None:
        self.sock.close()
        os.unlink(self.path)


def test_malformed_datagrams_are_counted_and_dropped_while_a_good_client_is_served(daemon):
    attacker, good = Client(daemon, "attacker"), Client(daemon, "good")
    try:
        for _ in range(20):
            for garbage in GARBAGE:
                attacker.send(garbage)
            reply = good.poll()
            assert reply == wire.Datagram(wire.REQ, b"")
        status = daemon.dyno_json("status")
        assert status["ipc"]["malformed"] == 20 * len(GARBAGE)
        assert status["ipc"]["received"] == 21 * len(GARBAGE) + 20 - len(GARBAGE)
        assert [p["pid"] for p in daemon.processes()] == [os.getpid()]
    finally:
        attacker.close()
        good.close()


def test_context_registration_is_answered_with_the_count(daemon):
    client = Client(daemon, "ctxt")
    try:
        client.send(wire.encode(wire.CTXT, wire.KinetoContext(device=3, pid=os.getpid(), job_id=0).pack()))
        data = client.sock.recv(wire.MAX_DATAGRAM)
        assert wire.decode(data) == wire.Datagram(wire.CTXT, wire.pack_context_reply(1))
    finally:
        client.close()


def test_a_client_that_never_reads_its_replies_cannot_stall_the_daemon(daemon):
    sluggard = Client(daemon, "sluggard")
    sluggard.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = wire.encode(wire.REQ, wire.KinetoRequest(3, 0, (os.getpid(),)).pack())
    try:
        for _ in range(3000):  # far more replies than its receive queue holds
            sluggard.send(request)
        survivor = Client(daemon, "survivor")
        try:
            assert survivor.poll().type == wire.REQ
        finally:
            survivor.close()
        status = daemon.dyno_json("status")["ipc"]
        assert status["send_errors"] > 0, "replies that could not be queued are dropped, not retried"
        assert status["replied"] + status["send_errors"] == 3001
    finally:
        sluggard.close()


def registered_client(daemon: Daemon, name: str) -> Client:
    client = Client(daemon, name)
    client.send(wire.encode(wire.HELLO, wire.Hello(pid=os.getpid()).to_payload()))
    assert wire.decode(client.sock.recv(wire.MAX_DATAGRAM)).type == wire.ACK
    return client


def test_reports_cannot_make_the_daemon_hold_unbounded_parts_or_devices(daemon):
    client = registered_client(daemon, "reports")
    try:
        huge = json.dumps({"seq": 1, "pid": 1, "part": 0, "parts": 10**9, "kinds": []}).encode()
        client.send(wire.encode(wire.METRICS, huge))
        device = {"kind": "Kernel", "device": 99999, "count": 1, "total_ns": 1, "min_ns": 1, "max_ns": 1}
        report = {
            "seq": 2,
            "pid": 1,
            "part": 0,
            "parts": 1,
            "backend": "x",
            "start_ns": 0,
            "end_ns": 1,
            "sampled_ns": 1,
            "kinds": [device],
        }
        client.send(wire.encode(wire.METRICS, json.dumps(report).encode()))
        wait_until(lambda: daemon.dyno_json("status")["ipc"]["malformed"] == 2, what="both refused")
        assert daemon.dyno("processes").returncode == 0
    finally:
        client.close()


def test_made_up_trace_ids_are_not_adopted_and_cannot_evict_a_pending_trace(daemon, tmp_path):
    """A registered process (one running before the daemon, as after a restart) reports events for more
    made-up traces than the store keeps: one is adopted, the rest refused with one log line, and the
    trace this daemon issued, still pending, stays known."""
    hello = wire.Hello(pid=os.getpid(), capabilities=["push", "nputrace"])
    client = Client(daemon, "tracer")
    try:
        client.send(wire.encode(wire.HELLO, hello.to_payload()))
        assert wire.decode(client.sock.recv(wire.MAX_DATAGRAM)).type == wire.ACK
        pending = daemon.dyno_json(
            "nputrace", "--pids", str(os.getpid()), "--start-step", "1000", "--log-file", str(tmp_path)
        )["trace_id"]
        before = daemon.dyno_json("status")["ipc"]["received"]
        for n in range(MAX_TRACES + 500):
            event = wire.TraceEvent(trace_id=f"t{n}", phase=TracePhase.READY)
            client.send(wire.encode(wire.EVENT, event.to_payload()))
        wait_until(
            lambda: daemon.dyno_json("status")["ipc"]["received"] >= before + MAX_TRACES + 500,
            what="every event read",
        )
        assert daemon.dyno("trace", pending).returncode == 0, "the issued trace is still known"
        assert daemon.dyno("trace", "t0").returncode == 0 and daemon.dyno("trace", "t1").returncode == 1
        refusals = daemon.log_file.read_text().count("not adopted")
        assert refusals == 1, "one line a minute per process"
    finally:
        client.close()


def test_a_process_that_registers_on_many_devices_counts_once(daemon):
    client = Client(daemon, "ctxt-mover")
    try:
        for device in range(50):
            client.send(
                wire.encode(wire.CTXT, wire.KinetoContext(device=device, pid=os.getpid(), job_id=0).pack())
            )
            assert wire.decode(client.sock.recv(wire.MAX_DATAGRAM)).payload == wire.pack_context_reply(1)
    finally:
        client.close()
