"""Flood a daemon's IPC sockets with datagrams: garbage, truncated, lying headers, unknown types, and
valid-looking messages of every type (some valid, some with one byte flipped), as fast as it takes them.

    flood.py SOCKET_DIR --seconds S --seed N [--as-uid UID]

Sends are blocking with a deadline: a daemon that stops reading for that long is a stall, and the
flood ends with exit code 3. Prints one JSON line: what was sent, how much of it cannot parse, the
replies read back, and the longest a send waited. With ``--as-uid`` (root only) the sockets are
connected first, then the process becomes that uid: the daemon sees a sender it must reject.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import socket
import struct
import sys
import time
from typing import Callable, Dict, List, Tuple

from msmonitor_contract import wire

STALL_S = 5.0
POOL = 3000
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
CATEGORIES = ("garbage", "truncated", "lying_header", "unknown_type", "valid", "flipped", "nested")


def _any_json(rng: random.Random, depth: int = 0) -> object:
    choice = rng.randrange(8 if depth < 2 else 5)
    if choice == 0:
        return None
    if choice == 1:
        return rng.random() < 0.5
    if choice == 2:
        return rng.choice([0, -1, 1, 2**31, 2**63, -(2**64), rng.randint(*INT64)])
    if choice == 3:
        return rng.choice([0.5, float("inf"), float("nan"), -1e308])
    if choice == 4:
        return "".join(rng.choice("ab=\n\0é\u2028/") for _ in range(rng.randrange(8)))
    if choice == 5:
        return [_any_json(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {str(rng.randrange(5)): _any_json(rng, depth + 1) for _ in range(rng.randrange(3))}


def _text(rng: random.Random) -> str:
    return "".join(rng.choice("abc_/0 ") for _ in range(rng.randrange(12)))


def _json_payload(rng: random.Random, msg_type: str) -> bytes:
    """A message of *msg_type* with plausible values; one field in three of any JSON type instead."""
    pid = rng.randint(1, 2**22)
    fields: Dict[str, Callable[[], object]] = {
        wire.HELLO: lambda: (
            wire.Hello(
                pid=pid,
                job_id=rng.randint(0, 9),
                rank=rng.randint(-1, 7),
                backend=_text(rng),
                step=rng.randint(0, 99),
            ).__dict__
        ),
        wire.BYE: lambda: {"pid": pid},
        wire.EVENT: lambda: (
            wire.TraceEvent(
                trace_id=str(rng.randrange(200)),
                phase=rng.choice(["ready", "running", "finished", "failed", "bogus"]),
                current_step=rng.randint(0, 99),
                files=[_text(rng)],
            ).__dict__
        ),
        wire.MONITOR: lambda: (
            wire.MonitorEvent(command_id=_text(rng), state=rng.choice(["idle", "running", "bogus"])).__dict__
        ),
        wire.ACK: lambda: {"keepalive_s": rng.random() * 10},
        wire.COMMAND: lambda: {"kind": "nputrace", "trace_id": "1", "config": "A=1"},
        wire.METRICS: lambda: {
            "v": 1,
            "seq": rng.randint(-1, 3),
            "pid": pid,
            "part": rng.randint(0, 1),
            "parts": rng.randint(1, 2),
            "backend": "flood",
            "start_ns": 0,
            "end_ns": rng.randint(0, 10**9),
            "sampled_ns": 1,
            "kinds": [
                {
                    "kind": rng.choice(["Kernel", "API", "Marker", "Nope"]),
                    "device": rng.randint(-2, 300),
                    "count": rng.randint(-1, 9),
                    "total_ns": rng.randint(0, 10**6),
                    "min_ns": 0,
                    "max_ns": 1,
                }
            ],
        },
        wire.DATA: lambda: {
            "kind": rng.choice(["Kernel", "Marker", "Nope"]),
            "deviceId": rng.choice([0, 7, 2**32 - 1, -5, 2**40]),
            "duration": rng.randint(-1, 10**6),
            "timestamp": rng.randint(0, 2**63),
            "domain": rng.choice([None, "d", 1]),
        },
    }
    values = fields[msg_type]()
    assert isinstance(values, dict)
    for key in list(values):
        if rng.random() < 0.3:
            values[key] = _any_json(rng)
    return json.dumps(values).encode()


def _payload(rng: random.Random, msg_type: str) -> bytes:
    if msg_type == wire.REQ:
        pids = tuple(rng.randint(*INT32) for _ in range(rng.randint(1, wire.MAX_PIDS)))
        return wire.KinetoRequest(rng.randint(*INT32), rng.randint(*INT64), pids).pack()
    if msg_type == wire.CTXT:
        return wire.KinetoContext(rng.randint(0, 15), rng.randint(1, 2**22), rng.randint(0, 3)).pack()
    if msg_type in (wire.NPU_TRACE_STATUS, wire.NPU_MONITOR_STATUS):
        return wire.NpuStatus(*(rng.randint(*INT32) for _ in range(5)), rng.randint(*INT64)).pack()
    return _json_payload(rng, msg_type)


TYPES = [
    wire.REQ,
    wire.CTXT,
    wire.NPU_TRACE_STATUS,
    wire.NPU_MONITOR_STATUS,
    wire.DATA,
    wire.METRICS,
    wire.HELLO,
    wire.ACK,
    wire.BYE,
    wire.COMMAND,
    wire.EVENT,
    wire.MONITOR,
]


def make(rng: random.Random) -> Tuple[str, bytes]:
    """One datagram and its category."""
    category = rng.choice(CATEGORIES)
    msg_type = rng.choice(TYPES)
    valid = wire.encode(msg_type, _payload(rng, msg_type))
    if category == "garbage":
        if rng.random() < 0.002:  # beyond the daemon's buffer: it arrives truncated
            return category, os.urandom(wire.MAX_DATAGRAM + rng.randrange(1, 100))
        return category, bytes(rng.randrange(256) for _ in range(rng.randrange(120)))
    if category == "truncated":
        return category, valid[: rng.randrange(len(valid))]
    if category == "lying_header":
        size = rng.choice([0, len(valid), 2**64 - 1, rng.randrange(2**64)])
        return category, struct.pack("=Q", size) + valid[8:]
    if category == "unknown_type":
        return category, wire.encode(
            rng.choice(["mm.nope", "reqx", "Req", "x" * 31]), valid[wire.HEADER_SIZE :]
        )
    if category == "flipped":
        at = rng.randrange(len(valid))
        return category, valid[:at] + bytes([valid[at] ^ (1 << rng.randrange(8))]) + valid[at + 1 :]
    if category == "nested":
        return category, wire.encode(
            rng.choice([wire.HELLO, wire.METRICS, wire.DATA]), b"[" * rng.randrange(1, 5000)
        )
    return category, valid


def known_bad(data: bytes) -> bool:
    """Whether the daemon must count *data* as malformed whatever its state (it cannot parse)."""
    try:
        datagram = wire.decode(data)
    except wire.WireError:
        return True
    return datagram.type not in TYPES or (datagram.type in (wire.ACK, wire.COMMAND))  # daemon -> plugin only


def _drain(sock: socket.socket) -> int:
    """Replies queued on *sock*, read without waiting (its timeout is for sends: recv would wait)."""
    count = 0
    while select.select([sock], [], [], 0)[0]:
        sock.recv(wire.MAX_DATAGRAM)
        count += 1
    return count


def connected(targets: List[str]) -> Tuple[List[socket.socket], List[socket.socket]]:
    """Two sockets per target, connected: all of them, and the bound ones whose replies come back."""
    socks: List[socket.socket] = []
    bound: List[socket.socket] = []
    for i, target in enumerate(targets):
        for bind in (True, False):  # unbound: the kernel autobinds it (SO_PASSCRED), nobody reads it
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * wire.MAX_DATAGRAM)
            if bind:
                sock.bind(f"\0mm-flood-{os.getpid()}-{i}")  # abstract: works whoever we become
                bound.append(sock)
            sock.connect(target)  # while we may still open the owner-only path
            sock.settimeout(STALL_S)
            socks.append(sock)
    return socks, bound


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("socket_dir")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--as-uid", type=int)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    pool = [make(rng) for _ in range(POOL)]
    names = (wire.DAEMON_ENDPOINT, wire.MSMONITOR_CONTROL_SOCKET, wire.MSMONITOR_DATA_SOCKET)
    targets = [
        os.path.join(args.socket_dir, n) for n in names if os.path.exists(os.path.join(args.socket_dir, n))
    ]
    socks, bound = connected(targets)
    if args.as_uid is not None:
        os.setgroups([])
        os.setgid(args.as_uid)
        os.setuid(args.as_uid)

    replies = 0
    sent, bad, oversize, failed, longest, stalled = 0, 0, 0, 0, 0.0, False
    by_category: Dict[str, int] = dict.fromkeys(CATEGORIES, 0)
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < args.seconds:
        category, data = pool[i % len(pool)]
        sock = socks[(i + i // len(pool)) % len(socks)]  # each pass sends every datagram elsewhere
        i += 1
        t0 = time.monotonic()
        try:
            sock.send(data)
        except socket.timeout:
            stalled = True
            break
        except OSError:
            failed += 1  # e.g. a datagram the kernel refuses outright: never reached the daemon
            continue
        longest = max(longest, time.monotonic() - t0)
        sent += 1
        bad += known_bad(data)
        oversize += len(data) > wire.MAX_DATAGRAM
        by_category[category] += 1
        if i % 64 == 0:  # read what the daemon answered, so that its replies keep finding room
            replies += sum(_drain(s) for s in bound)
    elapsed = time.monotonic() - start
    summary = {
        "sent": sent,
        "known_bad": bad,
        "oversize": oversize,
        "failed": failed,
        "by_category": by_category,
        "replies": replies,
        "seconds": round(elapsed, 3),
        "longest_send_s": round(longest, 4),
        "stalled": stalled,
        "targets": len(targets),
    }
    print(json.dumps(summary), flush=True)
    return 3 if stalled else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
