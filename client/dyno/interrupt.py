"""Ctrl-C on a stream that runs until the user stops it (``npu-monitor --watch``): the signal cancels the
call, and the stream ends as if the daemon had closed it.

Left to Python's default, SIGINT raises KeyboardInterrupt at whatever point the main thread is, which
during a stream is somewhere inside gRPC's wait for the next message (one demo run on a loaded machine
saw a watch outlive its SIGINT). A cancel is gRPC's own way out, whatever the call is doing.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any, Callable, Iterator

import grpc


@contextlib.contextmanager
def cancelled_on_interrupt(call: grpc.Future) -> Iterator[Callable[[grpc.RpcError], bool]]:
    """While in the block, SIGINT cancels *call*. Yields a test: whether an error the call raised is that
    cancel (the user's stop, not a failure)."""
    stopped = []

    def stop(signum: int, frame: Any) -> None:
        stopped.append(signum)
        call.cancel()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield lambda error: bool(stopped) and error is call
    finally:
        signal.signal(signal.SIGINT, previous)
