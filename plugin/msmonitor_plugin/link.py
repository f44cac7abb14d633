"""The plugin's connection to the daemon: a background thread that registers, heartbeats and listens.

Nothing here can block or fail the training thread: sends are non-blocking, a missing or restarted
daemon only delays registration (the next heartbeat re-registers), and every error is logged, not raised.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import random
import select
import socket
import threading
import time
import uuid
from typing import Callable, Deque, Hashable, List, Optional, Set, Tuple

from msmonitor_contract import holders, wire

from .daemon_socket import DaemonSocket, Squatted, daemon_uids
from .throttled import Throttled

log = logging.getLogger("msmonitor_plugin")

# Heartbeat bounds: never chattier than 5/s, never quieter than the daemon's keep-alive allows.
MIN_HEARTBEAT_S = 0.2
MAX_HEARTBEAT_S = 5.0
# While no daemon answers, retry with this back-off (doubling, each wait jittered) instead of the
# heartbeat: the processes of a node whose daemon restarts do not all register again at one instant.
ABSENT_RETRY_S = (0.2, MAX_HEARTBEAT_S)
# Messages the daemon could not take at once (its queue full) are retried with this back-off (doubling,
# each wait jittered). From 10 ms: a full queue does not empty in 1 ms, and a thousand processes
# retrying every millisecond spent most of a core on refused sends in the soak.
UNSENT_RETRY_S = (0.01, 0.1)
# Between heartbeats the link looks for news this often (a few attribute reads on its own thread, none on
# the training thread): a changed state (trace, monitor, service switch, profiler holder) re-registers at
# once, a changed step count is sent at most every STEP_REPORT_S, so `dyno status` and `dyno processes`
# are current within half a second while the daemon hears two small datagrams a second per process.
CHECK_S = 0.25
STEP_REPORT_S = 0.5

# What the process reports in its hello, for the link to see that it changed: (step count, the rest).
News = Callable[[], Tuple[int, Hashable]]

# Errors that mean "no daemon there right now" rather than a bug.
_ABSENT = {errno.ECONNREFUSED, errno.ENOENT, errno.EAGAIN, errno.ENOTCONN, errno.EPERM, errno.EACCES}


def jittered(seconds: float, rng: random.Random) -> float:
    """*seconds* ± 50 %: processes refused by one full queue do not all try again at the same instant."""
    return seconds * rng.uniform(0.5, 1.5)


class Backoff:
    """Waits that double from *bounds*' first to its last after each failure, each one :func:`jittered`
    from *rng* (the caller's own Random: never the job's ``random`` module, whose seed is the job's)."""

    def __init__(self, bounds: Tuple[float, float], rng: random.Random) -> None:
        self.first, self.most = bounds
        self.seconds = self.first  # the wait before jitter
        self._rng = rng

    def wait(self) -> float:
        """The wait before the next try, jittered."""
        return jittered(self.seconds, self._rng)

    def failed(self) -> None:
        """The try failed: the next wait doubles (up to the bound)."""
        self.seconds = min(self.seconds * 2, self.most)

    def next(self) -> float:
        """:meth:`wait`, then :meth:`failed`: the wait after a failure, the one after it doubled."""
        wait = self.wait()
        self.failed()
        return wait

    def reset(self) -> None:
        """A try succeeded: back to the first wait."""
        self.seconds = self.first


class DaemonLink:
    """Owns the plugin's datagram socket and the thread that talks to the daemon through it."""

    def __init__(
        self,
        socket_dir: str,
        make_hello: Callable[[], wire.Hello],
        on_datagram: Optional[Callable[[wire.Datagram], None]] = None,
        rng: Optional[random.Random] = None,
        news: Optional[News] = None,
    ) -> None:
        self.daemon = wire.endpoint_address(wire.DAEMON_ENDPOINT, socket_dir)
        self.address = wire.endpoint_address(f"msmonitor-{os.getpid()}-{uuid.uuid4().hex[:12]}", socket_dir)
        self.registered = threading.Event()
        self.heartbeat_s = MAX_HEARTBEAT_S
        self.trace_roots: List[str] = []  # the daemon's --trace-root, from its latest hello reply
        self._make_hello = make_hello
        # Messages the daemon must not miss (trace outcomes), kept while it is away and resent after
        # the next registration; bounded, oldest dropped.
        self._unsent: Deque[Tuple[str, bytes]] = collections.deque(maxlen=32)
        # Its own (or the caller's, seeded by a test): the job's random module and its seed are not ours.
        self._rng = rng if rng is not None else random.Random()
        self._on_datagram = on_datagram
        # Any local user can send to an abstract name: each drop is counted, said once a minute.
        self._foreign = Throttled(log, "dropped datagrams that did not come from dynolog")
        # Only the daemon may command us, and only the daemon's uids hear from us (a squatter on its name
        # would read every hello): see daemon_socket.
        self._sock = DaemonSocket(self.daemon, self.address, daemon_uids())
        self._squatters: Set[Optional[int]] = set()  # the holders' uids a warning named, each once
        self._unverified_said = False
        if isinstance(self.address, str):
            os.chmod(self.address, 0o600)
        self._wake_r, self._wake_w = socket.socketpair()
        # Never block a waker: while the thread drains a flood it reads no wake bytes, and a full pair
        # already guarantees it wakes. Blocking, the link thread (and stop() at exit) hung in _wake.
        self._wake_w.setblocking(False)
        self._stopping = False
        self._next_hello = 0.0  # monotonic deadline of the next heartbeat
        self._news = news
        self._sent: Tuple[int, Hashable] = (0, None)  # the news the daemon last heard
        self._step_sent_at = 0.0
        self._next_check = 0.0
        self._step_reports = False  # the daemon's ack says it takes wire.STEP
        self._thread = threading.Thread(target=self._run, name="msmonitor-link", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def send_reliably(self, msg_type: str, payload: bytes) -> None:
        """Send now, or soon from the link thread: the daemon's queue may be full for a moment (many
        processes reporting at once) or the daemon away (then after the next registration)."""
        if not self.send(msg_type, payload):
            self._unsent.append((msg_type, payload))
            self._wake()

    def _flush_unsent(self) -> bool:
        """Send what is waiting, oldest first; False when the daemon still takes nothing.

        Only while registered: a restarted daemon drops messages from a process it does not know yet.
        """
        while self._unsent and self.registered.is_set():
            try:
                self._sock.send(*self._unsent[0])
            except OSError as exc:
                if exc.errno != errno.EAGAIN:  # gone, not just busy: register again first
                    self.registered.clear()
                return False
            self._unsent.popleft()
        return not self._unsent

    def send(self, msg_type: str, payload: bytes = b"") -> bool:
        """One non-blocking send to the daemon; False (and no exception) when it is not there."""
        try:
            self._sock.send(msg_type, payload)
        except Squatted as exc:
            self._squatted(exc.holder)
            return False
        except OSError as exc:
            if exc.errno not in _ABSENT:
                log.warning("sending %s to dynolog failed: %s", msg_type, exc)
            return False
        if self._sock.unverified and not self._unverified_said:
            self._unverified_said = True
            log.info("the kernel does not say who holds %s: sending to it unverified", self._describe())
        return True

    def _squatted(self, holder: holders.Holder) -> None:
        """Once per holder's uid: nothing goes to it, it is retried as an absent daemon."""
        if holder.uid in self._squatters:
            return
        self._squatters.add(holder.uid)
        log.warning(
            "%s holds dynolog's address %s, and dynolog runs as none of uids %s (%s): nothing is sent to it, "
            "retrying later",
            holders.with_pid(holder).describe(),
            self._describe(),
            ",".join(str(uid) for uid in sorted(self._sock.uids or ())),
            "MSMONITOR_DAEMON_UIDS",
        )

    def _describe(self) -> str:
        return wire.describe_address(self.daemon)

    def heartbeat_now(self) -> None:
        """Re-register at once (the process changed: it imported a framework, say)."""
        self._next_hello = 0.0
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def stop(self) -> None:
        """Say goodbye to the daemon, stop the thread and remove the socket."""
        if self._stopping:
            return
        self._stopping = True
        self.send(wire.BYE, wire.Bye(pid=os.getpid()).to_payload())
        self._wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        # A thread still busy (in a command's callback) closes them itself as it ends: a socket closed
        # under its select() would fail it with EBADF.
        if not self._thread.is_alive():
            self.close()

    def close(self) -> None:
        self._sock.close()
        self._wake_r.close()
        self._wake_w.close()

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            if self._stopping:
                self.close()

    def _serve(self) -> None:
        absent = Backoff(ABSENT_RETRY_S, self._rng)
        while not self._stopping:
            try:
                if self._news is not None:
                    self._sent, self._step_sent_at = self._news(), time.monotonic()
                delivered = self.send(wire.HELLO, self._make_hello().to_payload())
                if delivered:
                    absent.reset()
                    wait = self.heartbeat_s
                else:
                    self.registered.clear()
                    wait = absent.next()
                self._next_hello = time.monotonic() + wait
                self._receive_until_next_hello()
            except Exception:  # the thread must survive anything; the process must never notice
                log.exception("msmonitor link error")
                self._next_hello = time.monotonic() + MAX_HEARTBEAT_S
                self._receive_until_next_hello()

    def _receive_until_next_hello(self) -> None:
        """Handle datagrams from the daemon until the next heartbeat is due or stop() is called; retry
        waiting messages meanwhile, 10 ms apart at first, backing off to 100 ms."""
        unsent = Backoff(UNSENT_RETRY_S, self._rng)
        while not self._stopping:
            now = time.monotonic()
            remaining = self._next_hello - now
            if remaining <= 0 or self._state_changed(now):
                return
            wait = min(remaining, unsent.wait()) if self._unsent else remaining
            if self._news is not None and self.registered.is_set():
                wait = min(wait, max(0.0, self._next_check - now))
            readable, _, _ = select.select([self._sock, self._wake_r], [], [], wait)
            if self._wake_r in readable:
                self._wake_r.recv(64)
            if self._sock in readable:
                self._drain()
            if self._unsent and not self._flush_unsent():
                unsent.failed()
            else:
                unsent.reset()

    def _state_changed(self, now: float) -> bool:
        """Every CHECK_S while registered: True when the hello's state changed (heartbeat now); a changed
        step count alone goes as a small wire.STEP, at most every STEP_REPORT_S."""
        if self._news is None or not self.registered.is_set() or now < self._next_check:
            return False
        self._next_check = now + CHECK_S
        try:
            step, state = self._news()
        except Exception:  # the link thread must outlive whatever its news costs
            log.exception("msmonitor: reading the process's state failed")
            return False
        if state != self._sent[1]:
            return True
        due = step != self._sent[0] and self._step_reports and now - self._step_sent_at >= STEP_REPORT_S
        if due and self.send(wire.STEP, wire.Step(step=step).to_payload()):
            self._sent, self._step_sent_at = (step, state), now
        return False

    def _drain(self) -> None:
        while True:
            try:
                data = self._sock.read()
            except (BlockingIOError, InterruptedError):
                return
            if data is None:
                self._foreign()
                continue
            try:
                self._handle(wire.decode(data))
            except wire.WireError as exc:
                log.warning("dropping a malformed datagram from dynolog: %s", exc)
            except Exception:
                log.exception("handling a datagram from dynolog failed")

    def _handle(self, datagram: wire.Datagram) -> None:
        if datagram.type == wire.ACK:
            ack = wire.Ack.from_payload(datagram.payload)
            # Three heartbeats per keep-alive: one lost datagram never makes the daemon forget us.
            self.heartbeat_s = min(MAX_HEARTBEAT_S, max(MIN_HEARTBEAT_S, ack.keepalive_s / 3))
            self.trace_roots = ack.trace_roots
            self._step_reports = ack.step_reports
            self._next_hello = min(self._next_hello, time.monotonic() + self.heartbeat_s)
            self.registered.set()
            self._flush_unsent()
        elif self._on_datagram is not None:
            self._on_datagram(datagram)
