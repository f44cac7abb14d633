"""``dyno dynamic`` sessions: one per stream of session steps (gRPC's ``Dynamic``), the controller of
the processes it holds.

A session attaches (its processes are held: a second controller is refused with this one's name),
then turns each ``start`` → ``stop`` into one window — a DYNAMIC trace, one ``PROF_`` directory per
process. It ends when its client quits or goes away (the hold ends with the stream: a killed ``dyno``
frees its processes as soon as its connection closes), after msprof's limits (time without
collecting, number of start/stop commands), or when every process it holds has exited. A window that
is collecting when the session ends is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable, List, Optional, Set, Union

from msmonitor_plugin.vocabulary import (
    DEFAULT_DYNAMIC_COMMAND_LIMIT,
    DEFAULT_DYNAMIC_IDLE_TIMEOUT_S,
    CommandKind,
    TracePhase,
)

from . import targeting
from .kinds.dynamic import AttachCommand, Hold, SessionRequest
from .model import CommandResult
from .node import Node
from .registry import ProcessRecord
from .traces import ProcessTrace, Trace


class SessionAction(enum.Enum):
    """What a ``dyno dynamic`` client asks of its session (NONE: news it did not ask for)."""

    NONE = 0
    ATTACH = 1
    START = 2
    STOP = 3
    STATUS = 4
    QUIT = 5  # stop collecting if collecting, then end the session


@dataclass(frozen=True)
class SessionStep:
    """One request on a session's stream."""

    seq: int
    action: SessionAction
    attach: Optional[AttachCommand] = None  # with ATTACH


@dataclass
class SessionProcess:
    """One process's part in a session's answer."""

    pid: int
    host_pid: int
    rank: int
    ok: bool
    detail: str
    window: Optional[ProcessTrace] = None  # the window's state in this process, when there is one


@dataclass
class SessionReply:
    seq: int  # of the request answered; 0: news nobody asked for
    action: SessionAction
    ok: bool  # at least one process did what was asked
    lines: List[str]
    processes: List[SessionProcess] = field(default_factory=list)
    window_id: str = ""
    ended: bool = False  # the session is over; the lines say why
    commands_left: int = 0


NO_FRAMEWORK = "python"  # the backend of a process that has imported no framework yet
START_WAIT_S = 5.0  # a start answers when every process started, else says at which step it will
STOP_WAIT_S = 60.0  # as long as msprof's client waits for a stop to be flushed

_A = SessionAction
_session_ids = itertools.count(1)


@dataclass
class Gone:
    """A held process left the node."""

    record: ProcessRecord
    why: str


class _Idle:
    """The idle timeout passed."""


Item = Union[SessionStep, Gone, _Idle, None]  # None: the client closed its side of the stream


class DynamicSession:
    def __init__(self, node: Node, attach: AttachCommand, holder: str, client: str) -> None:
        self._node = node
        self._attach = attach
        self._request = SessionRequest(attach, Hold(next(_session_ids), holder, client))
        self._idle_timeout_s = attach.idle_timeout_s or DEFAULT_DYNAMIC_IDLE_TIMEOUT_S
        self._command_limit = attach.command_limit or DEFAULT_DYNAMIC_COMMAND_LIMIT
        self._inbox: asyncio.Queue[Item] = asyncio.Queue()
        self._pids: Set[int] = set()  # the host pids it holds
        self._window: Optional[Trace] = None
        self._windows = 0
        self._warned: Set[str] = set()  # warnings the window's start answer gave: not repeated at stop
        self._commands = 0  # start and stop commands so far
        self._idle_since = time.monotonic()

    async def run(self, seq: int, requests: AsyncIterator[SessionStep]) -> AsyncIterator[SessionReply]:
        """Answer the attach (*seq*), then every request and every piece of news, until it ends."""
        reader = asyncio.ensure_future(self._read(requests))
        self._node.gone_listeners.append(self._gone)
        try:
            reply = await self._attach_processes(seq)
            yield reply
            while not reply.ended:
                reply = await self._handle(await self._next())
                yield reply
        finally:
            reader.cancel()
            self._node.gone_listeners.remove(self._gone)
            self._end()

    # --- the stream ---------------------------------------------------------------------------------

    async def _read(self, requests: AsyncIterator[SessionStep]) -> None:
        with contextlib.suppress(Exception):  # the client went away: the stream's end says so
            async for request in requests:
                await self._inbox.put(request)
        await self._inbox.put(None)

    def _gone(self, record: ProcessRecord, why: str) -> None:
        if record.host_pid in self._pids:
            self._inbox.put_nowait(Gone(record, why))

    async def _next(self) -> Item:
        """The next request or news; the idle timeout counts only while not collecting."""
        timeout = None if self._collecting else self._idle_since + self._idle_timeout_s - time.monotonic()
        try:
            return await asyncio.wait_for(self._inbox.get(), timeout)
        except asyncio.TimeoutError:
            return _Idle()

    async def _handle(self, item: Item) -> SessionReply:
        if item is None:
            return await self._quit(0, "the client closed the session")
        if isinstance(item, _Idle):
            return self._reply(
                0,
                _A.QUIT,
                False,
                [
                    f"no collection for {self._idle_timeout_s:g} s (--idle-timeout): the session ended; "
                    "the job keeps running, attach again any time"
                ],
                ended=True,
            )
        if isinstance(item, Gone):
            return self._process_gone(item)
        handlers = {
            _A.START: self._start,
            _A.STOP: self._stop,
            _A.STATUS: self._status,
            _A.QUIT: self._quit,
        }
        handler = handlers.get(item.action)
        if handler is None:
            return self._reply(
                item.seq, item.action, False, ["already attached: start, stop, status or quit"]
            )
        reply = await handler(item.seq)
        if item.action in (_A.START, _A.STOP):
            reply = await self._count_command(reply)
        return reply

    # --- the commands -------------------------------------------------------------------------------

    async def _attach_processes(self, seq: int) -> SessionReply:
        await self._await_registration()
        result = await self._node.pipeline.run(self._node.dynamic_attach, self._request)
        self._pids = {o.record.host_pid for o in result.taken}
        lines = [
            f"{_who(o.record)}: attached at step {o.record.current_step} ({o.record.backend})"
            if o.triggered
            else f"{_who(o.record)}: not attached: {o.detail}"
            for o in result.outcomes
        ]
        if not result.effective:
            reply = self._reply(seq, _A.ATTACH, False, [_refusal(result), *lines], ended=True)
        else:
            header = (
                f"attached to {len(self._pids)} process{'es' if len(self._pids) > 1 else ''}; windows go "
                f"under {self._attach.output} on {self._node.nputrace.hostname}; type help for the commands"
            )
            reply = self._reply(seq, _A.ATTACH, True, [header, *lines])
        reply.processes = [
            SessionProcess(o.record.pid, o.record.host_pid, o.record.rank, o.triggered, o.detail)
            for o in result.outcomes
        ]
        return reply

    async def _await_registration(self) -> None:
        """Launch mode: the job was just started; wait for a process under its pid to register and to
        import its framework (the plugin registers at interpreter start, before there is a profiler)."""
        registry, targets = self._node.registry, self._attach.targets
        await registry.changed.until(
            lambda: any(r.backend != NO_FRAMEWORK for r in targeting.select(registry, targets)),
            self._attach.wait_registration_s,
        )

    async def _start(self, seq: int) -> SessionReply:
        if self._collecting:
            assert self._window is not None
            return self._reply(seq, _A.START, False, [f"already started (window {self._window.trace_id})"])
        result = await self._node.pipeline.run(self._node.dynamic_window, self._request)
        if not result.effective:
            lines = [f"{_who(o.record)}: not started: {o.detail}" for o in result.outcomes]
            return self._reply(seq, _A.START, False, [_refusal(result), *lines])
        self._pids |= {o.record.host_pid for o in result.taken}
        window = self._window = self._node.traces.get(result.trace_id)
        assert window is not None
        self._windows += 1
        await _until(window, lambda p: p.phase in (TracePhase.RUNNING, *_FINAL), START_WAIT_S)
        lines = [_started(p) for p in window.processes.values()]
        self._warned = {f"{p.host_pid}:{w}" for p in window.processes.values() for w in p.warnings}
        ok = any(p.phase is not TracePhase.FAILED for p in window.processes.values())
        return self._reply(seq, _A.START, ok, lines, window)

    async def _stop(self, seq: int) -> SessionReply:
        if not self._collecting:
            return self._reply(seq, _A.STOP, False, ["not started"])
        window = self._window
        assert window is not None
        self._push_stop(window)
        await _until(window, lambda p: p.phase.final, STOP_WAIT_S)
        self._idle_since = time.monotonic()
        lines = [
            _stopped(p, window.trace_id, [w for w in p.warnings if f"{p.host_pid}:{w}" not in self._warned])
            for p in window.processes.values()
        ]
        ok = any(p.phase is TracePhase.FINISHED for p in window.processes.values())
        return self._reply(seq, _A.STOP, ok, lines, window)

    async def _status(self, seq: int) -> SessionReply:
        n = len(self._pids)
        lines = [
            f"attached to {n} process{'es' if n != 1 else ''}; {self._commands} of {self._command_limit} "
            "start/stop commands used"
        ]
        window = self._window
        if self._collecting and window is not None:
            lines += [self._collecting_line(p) for p in window.processes.values()]
        else:
            left = self._idle_since + self._idle_timeout_s - time.monotonic()
            lines.append(
                f"idle: {self._windows} window{'s' if self._windows != 1 else ''} so far; the session ends "
                f"after {max(0.0, left):.0f} s more without collecting"
            )
        return self._reply(seq, _A.STATUS, True, lines, window if self._collecting else None)

    async def _quit(self, seq: int, why: str = "quit") -> SessionReply:
        reply = await self._stop(seq) if self._collecting else None
        lines = [
            *(reply.lines if reply else []),
            f"{why}: the job keeps running; attach again any time",
        ]
        return self._reply(seq, _A.QUIT, True, lines, self._window if reply else None, ended=True)

    async def _count_command(self, reply: SessionReply) -> SessionReply:
        """msprof's cap on start/stop commands: the one that reaches it is answered, then the session
        ends (stopping a window it started)."""
        self._commands += 1
        reply.commands_left = max(0, self._command_limit - self._commands)
        if self._commands < self._command_limit:
            return reply
        if self._collecting:
            reply.lines += (await self._stop(reply.seq)).lines
        reply.lines.append(
            f"this session used its {self._command_limit} start/stop commands (--command-limit): it ended; "
            "attach again to go on"
        )
        reply.ended = True
        return reply

    def _process_gone(self, gone: Gone) -> SessionReply:
        record = gone.record
        self._pids.discard(record.host_pid)
        lines = [f"{_who(record)} {gone.why} at step {record.current_step}"]
        process = self._window.processes.get(record.host_pid) if self._window else None
        if process is not None and process.phase is TracePhase.FINISHED and process.start_step >= 0:
            lines.append(f"  its window was closed: {_written(process)}")
        elif process is not None and process.phase is TracePhase.FAILED:
            lines.append(f"  its window: {process.error}")
        ended = not self._pids
        if ended:
            lines.append("the task ended: every attached process has exited")
        return self._reply(0, _A.NONE, False, lines, ended=ended)

    # --- helpers ------------------------------------------------------------------------------------

    @property
    def _collecting(self) -> bool:
        return self._window is not None and not self._window.done

    def _collecting_line(self, p: ProcessTrace) -> str:
        record = self._node.registry.get(p.host_pid)
        if p.phase is TracePhase.READY:
            return f"{_who(p)}: starts at step {p.start_step}, its next step boundary"
        if p.phase is not TracePhase.RUNNING:
            return f"{_who(p)}: {p.phase.value}"
        since = next((at for phase, at in p.history if phase is TracePhase.RUNNING), p.updated_at)
        # The step the daemon knows is the last heartbeat's: say only what it knows for sure.
        current = record.current_step if record is not None else 0
        steps = ""
        if p.start_step > 0:
            steps = (
                f", steps {p.start_step}-{current}"
                if current > p.start_step
                else f", from step {p.start_step}"
            )
        return f"{_who(p)}: collecting for {time.time() - since:.1f} s{steps}, output {self._attach.output}"

    def _reply(
        self,
        seq: int,
        action: SessionAction,
        ok: bool,
        lines: List[str],
        window: Optional[Trace] = None,
        ended: bool = False,
    ) -> SessionReply:
        processes = [
            SessionProcess(
                p.pid, p.host_pid, p.rank, p.phase is not TracePhase.FAILED, p.error or p.phase.value, p
            )
            for p in (window.processes.values() if window is not None else ())
        ]
        return SessionReply(
            seq,
            action,
            ok,
            lines,
            processes,
            window_id=window.trace_id if window else "",
            ended=ended,
            commands_left=max(0, self._command_limit - self._commands),
        )

    def _end(self) -> None:
        """Free the processes; a window still collecting is stopped (its files are kept)."""
        self._node.holds.release(self._request.hold.session)
        window = self._window
        if window is not None and not window.done:
            self._push_stop(window)

    def _push_stop(self, window: Trace) -> None:
        """The window's stop, to each of its processes still collecting."""
        stop = self._node.dynamic_window.stop_text()
        for process in window.processes.values():
            record = self._node.registry.get(process.host_pid)
            if record is not None and not process.phase.final:
                self._node.delivery.push(record, CommandKind.DYNAMIC, window.trace_id, stop, final_only=True)


_FINAL = (TracePhase.FINISHED, TracePhase.FAILED)


async def _until(trace: Trace, done: Callable[[ProcessTrace], bool], timeout: float) -> bool:
    """Wait until *done* holds for every process of *trace*; False after *timeout* seconds."""
    return await trace.changes.until(lambda: all(done(p) for p in trace.processes.values()), timeout)


def _who(p: Union[ProcessRecord, ProcessTrace]) -> str:
    pid = f"pid {p.pid}" if p.pid == p.host_pid else f"pid {p.pid} (host pid {p.host_pid})"
    return f"{pid} (rank {p.rank})" if p.rank >= 0 else pid


def _refusal(result: CommandResult) -> str:
    return result.message if result.refusal is not None else f"{result.label}: no process took it"


def _started(p: ProcessTrace) -> str:
    if p.phase is TracePhase.FAILED:
        return f"{_who(p)}: not started: {p.error}"
    if p.phase is TracePhase.RUNNING:
        when = f"at step {p.start_step}" if p.start_step > 0 else "at once (it counts no steps)"
        line = f"{_who(p)}: started {when}"
    elif p.phase is TracePhase.READY:
        line = f"{_who(p)}: starts at step {p.start_step}, its next step boundary"
    else:
        line = f"{_who(p)}: start sent, not yet taken ({p.phase.value})"
    return "\n".join([line, *(f"  warning: {w}" for w in p.warnings)])


def _stopped(p: ProcessTrace, window_id: str, warnings: List[str]) -> str:
    if p.phase is TracePhase.FINISHED:
        return "\n".join([f"{_who(p)}: {_written(p)}", *(f"  warning: {w}" for w in warnings)])
    if p.phase is TracePhase.FAILED:
        return f"{_who(p)}: failed: {p.error}"
    return f"{_who(p)}: still writing after {STOP_WAIT_S:g} s; `dyno trace {window_id}` follows it"


def _written(p: ProcessTrace) -> str:
    steps = f", steps {p.start_step}-{p.stop_step - 1}" if p.start_step > 0 else ""
    n = len(p.files)
    return f"{p.output.rstrip('/')}/  ({n} file{'s' if n != 1 else ''}, {_size(p.size_bytes)}){steps}"


def _size(n: int) -> str:
    """Decimal units, as ``du --si`` and ``ls -lh --si`` show them."""
    if n < 1000:
        return f"{n} B"
    exponent = min(3, (len(str(n)) - 1) // 3)
    return f"{n / 1000**exponent:.1f} {' kMG'[exponent]}B"
