"""N processes that register with a daemon by hand, saying what the test makes them claim.

Each is a real child of this process, with its own pid: the kernel stamps every datagram with the pid of
the process that sends it, so many registrations need many processes. Each child sends one hello (the
plugin's ``mm.hello``, or with ``--kineto`` stock Kineto's ``req``) from its own abstract socket and
waits up to ``--ack-s`` for the daemon's answer; then it prints ``heard <type>`` for whatever the daemon
sends it, until this process ends.

Arguments: the daemon's address (a path, or ``@name`` for the abstract name), the number of children;
``--claim-pid P`` and ``--claim-ancestors a,b`` put words in the hello (or the ``req``'s pids).

Prints ``ready pid=P acked=a,b refused=c,d`` once every child has its answer or gave up waiting, then
waits for stdin to close; the children are then stopped (SIGTERM, waited for) and it prints ``done``.
Each child also dies with this process (``PR_SET_PDEATHSIG``).
"""

import argparse
import ctypes
import os
import select
import signal
import socket
import sys
from typing import Dict, List, Tuple

from msmonitor_contract import wire

_PR_SET_PDEATHSIG = 1


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("count", type=int)
    parser.add_argument("--claim-pid", type=int, default=0)
    parser.add_argument("--claim-ancestors", default="")
    parser.add_argument("--kineto", action="store_true")
    parser.add_argument("--ack-s", type=float, default=3.0)
    return parser.parse_args()


def registration(args: argparse.Namespace) -> bytes:
    pid = args.claim_pid or os.getpid()
    ancestors = [int(a) for a in args.claim_ancestors.split(",") if a]
    if args.kineto:
        return wire.encode(wire.REQ, wire.KinetoRequest(3, 0, (pid, *ancestors)).pack())
    hello = wire.Hello(pid=pid, ancestors=ancestors, capabilities=["push", "nputrace", "npumonitor"])
    return wire.encode(wire.HELLO, hello.to_payload())


def child(args: argparse.Namespace, daemon: wire.Address, report: int) -> None:
    """Register, tell the parent whether the daemon answered, then print what it sends."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"")  # an abstract name of the kernel's: a pid is not unique across pid namespaces
    sock.sendto(registration(args), daemon)
    answered = bool(select.select([sock], [], [], args.ack_s)[0])
    if answered:
        sock.recv(wire.MAX_DATAGRAM)  # the ack, or the reply to the req
    os.write(report, f"{'acked' if answered else 'refused'} {os.getpid()}\n".encode())
    os.close(report)
    while True:
        kind = wire.decode(sock.recv(wire.MAX_DATAGRAM)).type
        os.write(1, f"heard {kind} pid={os.getpid()}\n".encode())


def spawn(args: argparse.Namespace) -> Tuple[List[int], int]:
    daemon: wire.Address = (
        b"\0" + args.address[1:].encode() + b"\0" if args.address.startswith("@") else args.address
    )
    read, write = os.pipe()
    children = []
    for _ in range(args.count):
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                child(args, daemon, write)
            finally:
                os._exit(0)
        children.append(pid)
    os.close(write)
    return children, read


def main() -> None:
    args = parse()
    children, read = spawn(args)
    answers: Dict[str, List[str]] = {"acked": [], "refused": []}
    with os.fdopen(read) as reports:
        for line in reports:  # every child writes one line, then closes its end
            verdict, pid = line.split()
            answers[verdict].append(pid)
    said = " ".join(f"{verdict}={','.join(pids)}" for verdict, pids in answers.items())
    print(f"ready pid={os.getpid()} {said}", flush=True)
    sys.stdin.read()
    for pid in children:
        os.kill(pid, signal.SIGTERM)
    for pid in children:
        os.waitpid(pid, 0)
    print("done", flush=True)


if __name__ == "__main__":
    main()
