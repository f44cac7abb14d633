"""A local user's process that takes the daemon's IPC address first and reads what comes to it.

Argument: the address, a path or ``@name`` for the abstract name. Prints ``ready pid=N`` once bound, then
``heard <type> <bytes>`` for each datagram, and ``done`` when stdin closes.
"""

import os
import select
import socket
import sys

name = sys.argv[1]
address = b"\0" + name[1:].encode() + b"\0" if name.startswith("@") else name
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(address)
if isinstance(address, str):
    os.chmod(address, 0o777)  # anyone may send: the squatter wants to hear them
print(f"ready pid={os.getpid()}", flush=True)
while True:
    readable, _, _ = select.select([sock, sys.stdin], [], [])
    if sock in readable:
        data = sock.recv(65536)
        kind = data[8:40].rstrip(b"\0").decode(errors="replace")
        print(f"heard {kind} {len(data)}", flush=True)
    if sys.stdin in readable and not sys.stdin.readline():
        break
print("done", flush=True)
