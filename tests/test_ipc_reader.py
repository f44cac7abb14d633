"""The IPC is read while the event loop is busy: a request's work (a long gRPC message, say) must not
leave the plugins' heartbeats in the kernel's short datagram queue, where the next ones are lost, nor
let the daemon decide a process went silent before it handled what the process said."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from dynolog.ipc.endpoint import IpcCounters, IpcEndpoint, Sender
from harness import wait_until

# Far more than the kernel queues for a datagram socket nobody reads (net.unix.max_dgram_qlen: 10).
DATAGRAMS = 500


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[IpcEndpoint, asyncio.AbstractEventLoop, List[bytes]]]:
    """An endpoint served by an event loop on a thread of its own; what it handled, in order."""
    loop = asyncio.new_event_loop()
    handled: List[bytes] = []

    def handle(endpoint: IpcEndpoint, data: bytes, sender: Sender) -> None:
        handled.append(data)

    endpoint = IpcEndpoint(str(tmp_path / "daemon"), handle, IpcCounters())
    endpoint.open(loop)
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        yield endpoint, loop, handled
    finally:
        loop.call_soon_threadsafe(endpoint.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def busy(loop: asyncio.AbstractEventLoop) -> threading.Event:
    """Keep *loop* busy until the returned event is set (as a request's work would); back once it is."""
    begun, release = threading.Event(), threading.Event()

    def work() -> None:
        begun.set()
        release.wait()

    loop.call_soon_threadsafe(work)
    assert begun.wait(10)
    return release


def test_datagrams_are_read_while_the_loop_is_busy(served, tmp_path: Path) -> None:
    endpoint, loop, handled = served
    release = busy(loop)
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sender.bind(str(tmp_path / "plugin"))
    sender.settimeout(10)  # a blocking send: it waits only while nobody reads the daemon's socket
    try:
        for n in range(DATAGRAMS):
            sender.sendto(b"heartbeat %d" % n, endpoint.address)
    finally:
        release.set()
        sender.close()
    wait_until(lambda: len(handled) == DATAGRAMS, what="every datagram handled")
    assert handled == [b"heartbeat %d" % n for n in range(DATAGRAMS)]


def test_the_backlog_is_handled_before_anything_decides_on_it(served, tmp_path: Path) -> None:
    """The keep-alive sweep calls handle_backlog first: what arrived during a stall counts."""
    endpoint, loop, handled = served
    release = busy(loop)
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sender.settimeout(10)
    try:
        for n in range(DATAGRAMS):
            sender.sendto(b"%d" % n, endpoint.address)
        # The last few may still be in the kernel's queue: the reader takes them at once.
        wait_until(lambda: len(endpoint._backlog) == DATAGRAMS, what="the reader to read them all")
        seen: List[int] = []
        loop.call_soon_threadsafe(lambda: (endpoint.handle_backlog(), seen.append(len(handled))))
    finally:
        release.set()
        sender.close()
    wait_until(lambda: seen, what="the sweep's turn")
    assert seen == [DATAGRAMS]


def test_a_marker_runs_after_every_datagram_queued_before_it(served, tmp_path: Path) -> None:
    """What an exited process sent is handled before the daemon forgets it (dispatch's pidfd news)."""
    endpoint, loop, handled = served
    release = busy(loop)
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sender.settimeout(10)
    seen: List[int] = []
    try:
        for n in range(DATAGRAMS):
            sender.sendto(b"%d" % n, endpoint.address)
        endpoint.after_queued(lambda: seen.append(len(handled)))
    finally:
        release.set()
        sender.close()
    wait_until(lambda: seen, what="the marker's turn")
    assert seen == [DATAGRAMS]
