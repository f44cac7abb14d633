"""The bytes dynolog's and msMonitor's ``dyno`` binaries send (../shared/reference/legacy-wire.md: read
from their public sources and captured), and a raw sender that reads one framed reply.

The bodies are built here as the CLIs build them, with Rust's ``format!`` and no escaping, so a test can
send exactly what a user's binary sends, malformed JSON included.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Optional, Sequence

STATUS = b'{"fn":"getStatus"}'
VERSION = b'{"fn":"getVersion"}'


def set_config(
    config_lines: Sequence[str], job_id: int = 0, pids: str = "0", process_limit: int = 3
) -> bytes:
    """``setKinetOnDemandRequest`` as both CLIs write it: a newline first, 4-space indent, fixed key
    order, the config lines joined by the two characters backslash and n, values pasted unescaped."""
    config = "\\n".join(config_lines)
    return (
        '\n{\n    "fn": "setKinetOnDemandRequest",\n'
        f'    "config": "{config}",\n'
        f'    "job_id": {job_id},\n'
        f'    "pids": [{pids}],\n'
        f'    "process_limit": {process_limit}\n}}'
    ).encode()


def stock_gputrace(log_file: str, iterations: int = 0, duration_ms: int = 500, memory: bool = False) -> list:
    """dynolog's ``dyno gputrace`` config lines (``--iterations`` > 0: iteration mode)."""
    lines = [f"ACTIVITIES_LOG_FILE={log_file}"]
    if iterations > 0:
        lines += [
            "PROFILE_START_ITERATION=0",
            "PROFILE_START_ITERATION_ROUNDUP=1",
            f"ACTIVITIES_ITERATIONS={iterations}",
        ]
    else:
        lines += ["PROFILE_START_TIME=0", f"ACTIVITIES_DURATION_MSECS={duration_ms}"]
    lines.append("PROFILE_REPORT_INPUT_SHAPES=false")
    if memory:
        lines += [
            "PROFILE_PROFILE_MEMORY=true",
            "PROFILE_MEMORY=true",
            f"PROFILE_MEMORY_DURATION_MSECS={duration_ms}",
        ]
    return [*lines, "PROFILE_WITH_STACK=false", "PROFILE_WITH_FLOPS=false", "PROFILE_WITH_MODULES=false"]


def msmonitor_nputrace(log_dir: str, start_step: int, iterations: int, **overrides: str) -> list:
    """msMonitor's ``dyno nputrace``: its 27 keys in its order, ``None`` for unset optionals."""
    values = {
        "ACTIVITIES_LOG_FILE": log_dir,
        "PROFILE_START_ITERATION": "0",
        "PROFILE_START_STEP": str(start_step),
        "ACTIVITIES_ITERATIONS": str(iterations),
        "PROFILE_RECORD_SHAPES": "false",
        "PROFILE_PROFILE_MEMORY": "false",
        "PROFILE_WITH_STACK": "false",
        "PROFILE_WITH_FLOPS": "false",
        "PROFILE_WITH_MODULES": "false",
        "PROFILE_ACTIVITIES": "CPU,NPU",
        "PROFILE_ANALYSE": "false",
        "PROFILE_ASYNC_MODE": "false",
        "PROFILE_PROFILER_LEVEL": "Level0",
        "PROFILE_AIC_METRICS": "AiCoreNone",
        "PROFILE_L2_CACHE": "false",
        "PROFILE_OP_ATTR": "false",
        "PROFILE_MSPROF_TX": "false",
        "PROFILE_GC_DETECT_THRESHOLD": "None",
        "PROFILE_DATA_SIMPLIFICATION": "true",
        "PROFILE_EXPORT_TYPE": "Text",
        "PROFILE_HOST_SYS": "None",
        "PROFILE_SYS_IO": "false",
        "PROFILE_SYS_INTERCONNECTION": "false",
        "PROFILE_MSTX_DOMAIN_INCLUDE": "None",
        "PROFILE_MSTX_DOMAIN_EXCLUDE": "None",
        "PROFILE_IS_RANK": "false",
        "PROFILE_RANK_LIST": "None",
        **overrides,
    }
    return [f"{k}={v}" for k, v in values.items()]


# Keys msMonitor's nputrace gained after its first releases: an older binary sends none of them.
NEWER_NPUTRACE_KEYS = ("PROFILE_ASYNC_MODE", "PROFILE_L2_CACHE", "PROFILE_IS_RANK", "PROFILE_RANK_LIST")


def msmonitor_npu_monitor(
    start: bool, stop: bool = False, interval_s: int = 60, old: bool = False, **overrides: str
) -> list:
    """msMonitor's ``dyno npu-monitor``; *old*: the four keys of its 2025-03 release."""
    values = {
        "NPU_MONITOR_START": str(start).lower(),
        "NPU_MONITOR_STOP": str(stop).lower(),
        "REPORT_INTERVAL_S": str(interval_s),
        "DURATION": "0",
        "MSPTI_ACTIVITY_KIND": "Marker",
        "NPU_MONITOR_LOG_FILE": "",
        "NPU_MONITOR_EXPORT_TYPE": "DB",
        "JSONL_ROTATE_LOG_LINES": "",
        "JSONL_ROTATE_LOG_FILES": "",
        "NPU_MONITOR_FILTER": "",
        **overrides,
    }
    if old:
        values = {
            k: values[k]
            for k in ("NPU_MONITOR_START", "NPU_MONITOR_STOP", "REPORT_INTERVAL_S", "MSPTI_ACTIVITY_KIND")
        }
    return [f"{k}={v}" for k, v in values.items()]


def cancel_trace(trace_id: str) -> bytes:
    """This daemon's own ``cancelTrace`` (no stock CLI sends it)."""
    return f'{{"fn":"cancelTrace","trace_id":"{trace_id}"}}'.encode()


def frame(body: bytes) -> bytes:
    return struct.pack("=i", len(body)) + body


def send(
    port: int,
    body: bytes,
    tls: Optional[ssl.SSLContext] = None,
    host: str = "127.0.0.1",
    timeout: float = 30.0,
) -> Optional[bytes]:
    """The reply body to one request, or None when the daemon closed without one (as the C++ daemons
    do for what they refuse). Prefix and body go in two writes, as both CLIs send them."""
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock = tls.wrap_socket(raw, server_hostname="localhost") if tls is not None else raw
        sock.sendall(struct.pack("=i", len(body)))
        sock.sendall(body)
        return read_reply(sock)


def read_reply(sock: socket.socket) -> Optional[bytes]:
    prefix = _read(sock, 4)
    if len(prefix) < 4:
        return None
    (size,) = struct.unpack("=i", prefix)
    body = _read(sock, size)
    assert len(body) == size, f"a reply of {len(body)} bytes where the prefix said {size}"
    return body


def _read(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        try:
            piece = sock.recv(count - len(data))
        except (ConnectionResetError, ssl.SSLError):
            break
        if not piece:
            break
        data += piece
    return bytes(data)


def client_context(ca: str, cert: str, key: str) -> ssl.SSLContext:
    """What msMonitor's client does: verify the server against ca.crt only, present client.crt, no ALPN."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(ca)
    context.load_cert_chain(cert, key)
    return context
