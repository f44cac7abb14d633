"""Ctrl-C on a stream dyno follows (``npu-monitor --watch``, a trace followed with ``--wait``): the signal
cancels the call, and the stream ends as if the daemon had closed it.

Left to Python's default, SIGINT raises KeyboardInterrupt at whatever point the main thread is, which
during a stream is somewhere inside gRPC's wait for the next message (one demo run on a loaded machine
saw a watch outlive its SIGINT). A cancel is gRPC's own way out, whatever the call is doing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

import grpc


@contextlib.contextmanager
def cancelled_on_interrupt(call: grpc.Future) -> Iterator[Callable[[grpc.RpcError], bool]]:
    """While in the block, SIGINT cancels *call*. Yields a test: whether an error the call raised is that
    cancel (the user's stop, not a failure)."""
    if threading.current_thread() is not threading.main_thread():
        # Only the main thread may set a handler, and signals reach only it: a host followed on a
        # fan-out's thread ends with the whole command (dyno.main's Ctrl-C).
        yield lambda error: False
        return
    stopped = []

    def stop(signum: int, frame: Any) -> None:
        stopped.append(signum)
        call.cancel()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield lambda error: bool(stopped) and error is call
    finally:
        signal.signal(signal.SIGINT, previous)
