"""A fake dynolog that exists only to be hostile to a plugin: it binds the daemon's address itself, so
the plugin takes its datagrams for the daemon's, and floods it.

Usage: hostile_daemon.py SOCKET_DIR MODE, MODE one of

* ``flood`` — valid, wire-encoded ``mm.command`` datagrams, each followed by an ``mm.ack``, back to
  back: npu-monitor stop, nputrace for a step that has already begun (refused), a stop for a ``dyno
  dynamic`` window the process does not have (refused). Each is a command the real daemon sends and
  each is answered; none leaves work pending on the training thread, so ``step()`` stays on its idle
  path. A thread reads the answers, as a daemon does.
* ``flood-deaf`` — a daemon stuck in a loop: the same commands plus npu-monitor start, and nothing is
  read, so the plugin's answers meet a full queue (``net.unix.max_dgram_qlen`` datagrams, often 10).
  A start is slow to handle (it looks for libmspti.so: ``ctypes.util.find_library`` runs a
  subprocess), so the plugin's socket never runs empty while it handles the flood.
* ``garbage`` — random datagrams: random bytes, headers that lie about the size, a valid header over
  random bytes, JSON of the wrong shape (and nested past the recursion limit) under the plugin's own
  message types, and datagrams over the plugin's 64 KiB limit. A thread reads the answers.

It binds ``SOCKET_DIR/dynolog``, answers the plugin's first ``mm.hello`` with an ``mm.ack``, prints
``ready plugin=ADDRESS``, and starts when a line arrives on stdin. It sends with blocking sends, as
fast as the plugin's socket takes them; a send that waits 0.2 s for room gives up and counts as a
timeout (``timeouts_in_a_row``: the plugin has stopped reading). Meanwhile ``count`` on stdin answers
``count <json>`` of what was sent so far. When stdin closes it stops, reads what is left, prints
``stats <json>`` (what it sent, and what the plugin sent it, by type) and removes its socket.
"""

import collections
import contextlib
import json
import os
import random
import select
import socket
import struct
import sys
import threading
import time
from typing import Counter, List

from msmonitor_contract import configtext, wire
from msmonitor_contract.kinds import DYNAMIC, NPUMONITOR, NPUTRACE
from msmonitor_contract.vocabulary import CommandKind

MODES = ("flood", "flood-deaf", "garbage")
SEND_TIMEOUT_S = 0.2  # a blocked send gives up this often, so that the end of stdin is seen
ROUNDS = 2000  # flood rounds encoded in advance (trace ids repeat after that many)
ACK = wire.encode(wire.ACK, wire.Ack(keepalive_s=60.0, daemon_version="hostile").to_payload())


def _monitor(start: bool) -> str:
    return configtext.render(
        NPUMONITOR.keys,
        {
            "NPU_MONITOR_START": start,
            "NPU_MONITOR_STOP": not start,
            "REPORT_INTERVAL_S": 1,
            "DURATION": 0.0,
            "MSPTI_ACTIVITY_KIND": ["Kernel", "API"],
            "NPU_MONITOR_LOG_FILE": "",
            "NPU_MONITOR_EXPORT_TYPE": "Jsonl",
        },
    )


def flood_datagrams(serial: int, stuck: bool) -> List[bytes]:
    """The datagrams of one round; trace ids differ from round to round.

    ``flood``: each command followed by an ack. ``flood-deaf``: a start, a stop and six refusals, then
    one ack: nine datagrams, fewer than the plugin's queue holds, so while the plugin handles the slow
    start the queue fills up again, and it never runs empty.
    """
    nputrace = configtext.render(
        NPUTRACE.keys,
        {"ACTIVITIES_LOG_FILE": "/nonexistent/hostile", "PROFILE_START_STEP": 0, "ACTIVITIES_ITERATIONS": 1},
    )
    window_stop = configtext.render(DYNAMIC.keys, {"DYNAMIC_ACTION": "stop"})
    refusals = [(CommandKind.NPUTRACE, f"npu{serial}-{i}", nputrace) for i in range(3 if stuck else 1)] + [
        (CommandKind.DYNAMIC, f"win{serial}-{i}", window_stop) for i in range(3 if stuck else 1)
    ]
    commands = [
        *([(CommandKind.NPUMONITOR, f"start{serial}", _monitor(True))] if stuck else []),
        (CommandKind.NPUMONITOR, f"stop{serial}", _monitor(False)),
        *refusals,
    ]
    out: List[bytes] = []
    for kind, trace_id, text in commands:
        command = wire.Command(
            kind=kind.value, trace_id=trace_id, config=configtext.with_trace_id(text, trace_id)
        )
        out.append(wire.encode(wire.COMMAND, command.to_payload()))
        if not stuck:
            out.append(ACK)
    return [*out, ACK] if stuck else out


def garbage_datagrams(rng: random.Random, n: int = 512) -> List[bytes]:
    """A pool of malformed datagrams, sent round robin."""
    types = [wire.COMMAND, wire.ACK, wire.HELLO, wire.REQ, "mm.x", "\x7f"]
    nested = b"[" * wire.MAX_DATAGRAM  # json.loads hits the recursion limit long before the end
    shapes = [
        b'{"kind": 5, "trace_id": null, "config": []}',
        b'{"kind": "nputrace", "trace_id": "x", "config": "NO EQUALS SIGN"}',
        b'{"kind": "npumonitor", "trace_id": "x", "config": "NPU_MONITOR_START=maybe"}',
        b'{"keepalive_s": "soon"}',
        b'{"keepalive_s": -1e308}',
        b"[1, 2, 3]",
        b'"\\ud800"',
        b"[" * 5000 + b"]" * 5000,
    ]
    out: List[bytes] = []
    for i in range(n):
        which = i % 6
        if which == 0:  # random bytes, any length up to a page
            out.append(os.urandom(rng.randrange(0, 4096)))
        elif which == 1:  # a header that lies about the size
            out.append(
                struct.pack("=Q32s", rng.randrange(2**64), rng.choice(types).encode()) + os.urandom(64)
            )
        elif which == 2:  # a valid header over random bytes
            out.append(wire.encode(rng.choice(types), os.urandom(rng.randrange(0, 2048))))
        elif which == 3:  # JSON of the wrong shape under the plugin's own types
            out.append(wire.encode(rng.choice([wire.COMMAND, wire.ACK]), rng.choice(shapes)))
        elif which == 4:  # over the plugin's receive buffer: truncated, so dropped
            out.append(wire.encode(wire.COMMAND, os.urandom(wire.MAX_DATAGRAM + rng.randrange(1, 4096))))
        else:
            out.append(wire.encode(wire.COMMAND, nested[: wire.MAX_DATAGRAM - wire.HEADER_SIZE - 1]))
    return out


def count(received: Counter[str], data: bytes) -> None:
    try:
        received[wire.decode(data).type] += 1
    except wire.WireError:
        received["malformed"] += 1


def read_answers(sock: socket.socket, received: Counter[str], stop: threading.Event) -> None:
    """Read what the plugin sends, as a daemon would; counted by type."""
    while not stop.is_set():
        with contextlib.suppress(OSError):
            if select.select([sock], [], [], 0.1)[0]:
                count(received, sock.recv(wire.MAX_DATAGRAM, socket.MSG_DONTWAIT))


def commands(sent: Counter, stop: threading.Event) -> None:
    """stdin while it floods: ``count`` answers ``count <json>`` of what was sent so far; the end of
    stdin stops it."""
    for line in sys.stdin:
        if line.strip() == "count":
            print("count " + json.dumps(dict(sent)), flush=True)
    stop.set()


def datagram_pool(mode: str) -> List[bytes]:
    """Encoded before the start, so that the sending loop does nothing else."""
    if mode == "garbage":
        return garbage_datagrams(random.Random(12))
    return [d for serial in range(ROUNDS) for d in flood_datagrams(serial, mode == "flood-deaf")]


def send_until_stopped(
    sock: socket.socket, plugin: str, pool: List[bytes], sent: Counter[str], stop: threading.Event
) -> float:
    """Send *pool* round robin to *plugin* until *stop*; the seconds it took."""
    # The kernel's send timeout, not Python's: a Python timeout polls, and an unconnected datagram
    # socket always polls writable, so it would spin on EAGAIN instead of waiting for room.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("@ll", 0, int(SEND_TIMEOUT_S * 1e6)))
    t0 = time.monotonic()
    while not stop.is_set():
        for datagram in pool:
            try:
                sock.sendto(datagram, plugin)
                sent["datagrams"] += 1
                sent["bytes"] += len(datagram)
                sent["timeouts_in_a_row"] = 0
            except BlockingIOError:
                sent["timeouts"] += 1  # the plugin read nothing for SEND_TIMEOUT_S
                sent["timeouts_in_a_row"] += 1
            except OSError as exc:
                sent[f"error:{exc.errno}"] += 1
            if stop.is_set():
                break
    return time.monotonic() - t0


def count_the_rest(sock: socket.socket, received: Counter[str]) -> None:
    """What the plugin sent that is still queued on *sock*."""
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        while True:
            count(received, sock.recv(wire.MAX_DATAGRAM))


def main() -> int:
    socket_dir, mode = sys.argv[1], sys.argv[2]
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    address = wire.endpoint_address(wire.DAEMON_ENDPOINT, socket_dir)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)  # the > 64 KiB datagrams fit
    received: Counter[str] = collections.Counter()
    data, plugin = sock.recvfrom(wire.MAX_DATAGRAM)
    count(received, data)
    sock.sendto(ACK, plugin)
    print(f"ready plugin={plugin}", flush=True)

    pool = datagram_pool(mode)
    stop = threading.Event()
    sent: Counter[str] = collections.Counter()
    sys.stdin.readline()
    threading.Thread(target=commands, args=(sent, stop), daemon=True).start()
    reader = None
    if mode != "flood-deaf":
        reader = threading.Thread(target=read_answers, args=(sock, received, stop), daemon=True)
        reader.start()
    seconds = send_until_stopped(sock, plugin, pool, sent, stop)
    if reader is not None:
        reader.join()
    count_the_rest(sock, received)
    sock.close()
    os.unlink(address)
    stats = {"mode": mode, "seconds": seconds, "sent": dict(sent), "received": dict(received)}
    print("stats " + json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
