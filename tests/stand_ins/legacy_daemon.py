"""A stand-in for the C++ daemons' JSON RPC: dynolog's stock ``dynolog`` or msMonitor's, as the
reference (shared/reference/legacy-wire.md) documents them answering. Tests run ``dyno`` against it as
against a host that speaks nothing else; it is none of their code.

    python legacy_daemon.py --flavor dynolog|msmonitor|this-project [--certs-dir DIR] [--processes 101,102]
                            [--busy 102]

Prints ``legacy stand-in ready port=N`` (a port the OS chose), then one line per connection, in order:
``request <base64>`` (the bytes of a whole framed request: length, then body) followed by ``reply
<json>`` or ``no reply``, or ``dropped <why>`` for a connection that never made a request. Like the
stock server it serves one connection at a time: a client that holds one open holds up the next.
Framing written out here (not dynoproto.legacy), so that a mistake there does not hide in both ends.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import ssl
import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

LENGTH = struct.Struct("=i")  # int32 in the host's byte order, as the C++ daemons memcpy it
MSMONITOR_MAX = 8192  # msMonitor's MAX_MESSAGE_LEN: a request must be shorter
MSMONITOR_READ_TIMEOUT_S = 3.0  # its SO_RCVTIMEO
STATUS = {
    "dynolog": {"status": 1},
    "msmonitor": {"current_step": 42, "npumonitor": "Idle", "nputrace": "Idle"},
    # Not a C++ daemon: this project's, which answers both CLIs' keys at once, with its gRPC stuck.
    "this-project": {"status": 1, "current_step": 42, "npumonitor": "Idle", "nputrace": "Idle"},
}
VERSION = {"dynolog": "0.6.0", "msmonitor": "0.3.2", "this-project": "0.1.0"}


class Dropped(Exception):
    pass


def say(line: str) -> None:
    print(line, flush=True)


def read(conn: socket.socket, size: int, got: bytes) -> bytes:
    """*size* more bytes; Dropped when the peer closes first (the stock server just gives up then)."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(min(size - len(data), 1 << 16))
        if not chunk:
            raise Dropped(f"closed after {len(got) + len(data)} bytes (wanted {LENGTH.size + size})")
        data += chunk
    return data


def request(conn: socket.socket, flavor: str) -> Tuple[bytes, bytes]:
    prefix = read(conn, LENGTH.size, b"")
    size = LENGTH.unpack(prefix)[0]
    if size <= 0:
        raise Dropped(f"length {size}")
    if flavor == "msmonitor" and size >= MSMONITOR_MAX:
        raise Dropped(f"length {size} over msMonitor's cap")
    return prefix, read(conn, size, prefix)


def set_config(args: argparse.Namespace, req: Dict[str, Any]) -> Dict[str, Any]:
    if not isinstance(req.get("config"), str) or not isinstance(req.get("pids"), list):
        return {"status": "failed"}
    pids, limit = req["pids"], req.get("process_limit", 1000)
    matched = [p for p in args.processes if pids == [0] or p in pids][:limit]
    triggered = [p for p in matched if p not in args.busy]
    profilers = {
        "activityProfilersBusy": len(matched) - len(triggered),
        "activityProfilersTriggered": triggered,
        "eventProfilersBusy": 0,
        "eventProfilersTriggered": [],
        "processesMatched": matched,
    }
    if args.flavor == "dynolog":
        return profilers
    if not triggered:
        return {"commandStatus": "ineffective"}
    return {**profilers, "commandStatus": "effective"}


def answer(args: argparse.Namespace, body: bytes) -> Optional[Dict[str, Any]]:
    """The reply, or None where the C++ server closes without one (bad JSON, no or unknown fn)."""
    try:
        req = json.loads(body)
    except ValueError:
        return None
    fn = req.get("fn") if isinstance(req, dict) else None
    if fn == "getStatus":
        return STATUS[args.flavor]
    if fn == "getVersion":
        return {"version": VERSION[args.flavor]}
    if fn == "setKinetOnDemandRequest":
        return set_config(args, req)
    return None


def serve_one(raw: socket.socket, args: argparse.Namespace, context: Optional[ssl.SSLContext]) -> None:
    if args.flavor == "msmonitor":
        raw.settimeout(MSMONITOR_READ_TIMEOUT_S)
    try:
        conn = context.wrap_socket(raw, server_side=True) if context else raw  # takes over the fd
    except OSError as exc:  # ssl.SSLError too: a failed handshake
        raw.close()
        say(f"dropped {exc}")
        return
    with conn:
        try:
            prefix, body = request(conn, args.flavor)
        except (Dropped, OSError) as exc:  # timeouts are OSErrors
            say(f"dropped {exc}")
            return
        say(f"request {base64.b64encode(prefix + body).decode()}")
        reply = answer(args, body)
        if reply is None:
            say("no reply")
            return
        data = json.dumps(reply, separators=(",", ":"), sort_keys=True).encode()
        conn.sendall(LENGTH.pack(len(data)) + data)
        say(f"reply {data.decode()}")


def tls_context(certs_dir: str) -> ssl.SSLContext:
    """msMonitor's server: its server.crt and key, clients verified against ca.crt, no ALPN."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(f"{certs_dir}/ca.crt")
    context.load_cert_chain(f"{certs_dir}/server.crt", f"{certs_dir}/server.key")
    return context


def pid_list(text: str) -> List[int]:
    return [int(p) for p in text.split(",") if p]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flavor", choices=sorted(STATUS), required=True)
    parser.add_argument("--certs-dir")
    parser.add_argument("--processes", type=pid_list, default=[])
    parser.add_argument("--busy", type=pid_list, default=[])
    args = parser.parse_args()
    context = tls_context(args.certs_dir) if args.certs_dir else None
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(50)
        say(f"legacy stand-in ready port={server.getsockname()[1]}")
        while True:
            serve_one(server.accept()[0], args, context)


if __name__ == "__main__":
    sys.exit(main())
