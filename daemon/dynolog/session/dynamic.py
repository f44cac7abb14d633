"""``dyno dynamic`` sessions: one per stream of session steps (gRPC's ``Dynamic``), the controller of
the processes it holds.

A session attaches (its processes are held: a second controller is refused with this one's name),
then turns each ``start`` → ``stop`` into one window — a DYNAMIC trace, one ``PROF_`` directory per
process. It ends when its client quits or goes away (the hold ends with the stream: a killed ``dyno``
frees its processes as soon as its connection closes), after msprof's limits (time without
collecting, number of start/stop commands), or when every process it holds has exited. A window that
is collecting when the session ends is stopped.

Each answer is a list of parts (:mod:`.messages`); a start that reaches the command limit also stops
the window: two moments in one answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import time
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable, Dict, List, Optional, Set, Union

from msmonitor_contract.vocabulary import (
    DEFAULT_DYNAMIC_COMMAND_LIMIT,
    DEFAULT_DYNAMIC_IDLE_TIMEOUT_S,
    CommandKind,
    SessionNews,
    TracePhase,
)

from ..core import targeting
from ..core.delivery import Delivery
from ..core.model import CommandResult
from ..core.pipeline import CommandPipeline
from ..core.registry import ProcessRecord, Registry
from ..core.traces import ProcessTrace, Trace, TraceStore
from ..kinds.dynamic import AttachCommand, DynamicAttach, DynamicWindow, Hold, Holds, SessionRequest
from .messages import SessionAction, SessionPart, SessionProcess, SessionReply, SessionStep


@dataclass(frozen=True)
class SessionDeps:
    """What a session works with, and nothing else of the node: the pipeline and the two dynamic
    policies it runs, the records it selects and the trace store it follows, the holds it releases, the
    delivery of a window's stop, and the news of a process that left."""

    pipeline: CommandPipeline
    attach: DynamicAttach
    window: DynamicWindow
    registry: Registry
    traces: TraceStore
    holds: Holds
    delivery: Delivery
    gone_listeners: List[Callable[[ProcessRecord, str], None]]
    hostname: str


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
    def __init__(self, deps: SessionDeps, attach: AttachCommand, holder: str, client: str) -> None:
        self._deps = deps
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
        self._deps.gone_listeners.append(self._gone)
        try:
            reply = await self._attach_processes(seq)
            yield reply
            while not reply.ended:
                reply = await self._handle(await self._next())
                yield reply
        finally:
            reader.cancel()
            self._deps.gone_listeners.remove(self._gone)
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
            part = SessionPart(SessionNews.IDLE_TIMEOUT, idle_timeout_s=self._idle_timeout_s)
            return _ended(self._reply(0, _A.QUIT, False, [part]))
        if isinstance(item, Gone):
            return self._process_gone(item)
        handlers: Dict[SessionAction, Callable[[int], Awaitable[SessionReply]]] = {
            _A.START: self._start,
            _A.STOP: self._stop,
            _A.STATUS: self._status,
            _A.QUIT: self._quit,
        }
        handler = handlers.get(item.action)
        if handler is None:
            return self._reply(item.seq, item.action, False, [SessionPart(SessionNews.ALREADY_ATTACHED)])
        reply = await handler(item.seq)
        if item.action in (_A.START, _A.STOP):
            reply = await self._count_command(reply)
        return reply

    # --- the commands -------------------------------------------------------------------------------

    async def _attach_processes(self, seq: int) -> SessionReply:
        await self._await_registration()
        result = await self._deps.pipeline.run(self._deps.attach, self._request)
        self._pids = {o.record.host_pid for o in result.taken}
        processes = [SessionProcess.of_record(o.record, o.triggered, o.detail) for o in result.outcomes]
        if not result.effective:
            reply = _ended(self._reply(seq, _A.ATTACH, False, [_refused(result, processes)]))
        else:
            attached = SessionPart(
                SessionNews.ATTACHED,
                processes,
                output=self._attach.output,
                hostname=self._deps.hostname,
                attached=len(self._pids),
            )
            reply = self._reply(seq, _A.ATTACH, True, [attached])
        reply.processes = processes
        return reply

    async def _await_registration(self) -> None:
        """Launch mode: the job was just started; wait for a process under its pid to register and to
        import its framework (the plugin registers at interpreter start, before there is a profiler)."""
        registry, targets = self._deps.registry, self._attach.targets
        await registry.changed.until(
            lambda: any(r.backend != NO_FRAMEWORK for r in targeting.select(registry, targets)),
            self._attach.wait_registration_s,
        )

    async def _start(self, seq: int) -> SessionReply:
        if self._collecting:
            assert self._window is not None
            part = SessionPart(SessionNews.ALREADY_STARTED, window_id=self._window.trace_id)
            return self._reply(seq, _A.START, False, [part])
        result = await self._deps.pipeline.run(self._deps.window, self._request)
        if not result.effective:
            processes = [SessionProcess.of_record(o.record, False, o.detail) for o in result.outcomes]
            return self._reply(seq, _A.START, False, [_refused(result, processes)])
        self._pids |= {o.record.host_pid for o in result.taken}
        window = self._window = self._deps.traces.get(result.trace_id)
        assert window is not None
        self._windows += 1
        await _until(window, lambda p: p.phase in (TracePhase.RUNNING, *_FINAL), START_WAIT_S)
        started = SessionPart(
            SessionNews.STARTED, [SessionProcess.of_window(p) for p in window.processes.values()]
        )
        self._warned = {f"{p.host_pid}:{w}" for p in window.processes.values() for w in p.warnings}
        ok = any(p.phase is not TracePhase.FAILED for p in window.processes.values())
        return self._reply(seq, _A.START, ok, [started], window)

    async def _stop(self, seq: int) -> SessionReply:
        if not self._collecting:
            return self._reply(seq, _A.STOP, False, [SessionPart(SessionNews.NOT_STARTED)])
        window = self._window
        assert window is not None
        self._push_stop(window)
        await _until(window, lambda p: p.phase.final, STOP_WAIT_S)
        self._idle_since = time.monotonic()
        stopped = SessionPart(
            SessionNews.STOPPED,
            [
                SessionProcess.of_window(
                    p, new_warnings=[w for w in p.warnings if f"{p.host_pid}:{w}" not in self._warned]
                )
                for p in window.processes.values()
            ],
            window_id=window.trace_id,
            waited_s=STOP_WAIT_S,
        )
        ok = any(p.phase is TracePhase.FINISHED for p in window.processes.values())
        return self._reply(seq, _A.STOP, ok, [stopped], window)

    async def _status(self, seq: int) -> SessionReply:
        status = SessionPart(
            SessionNews.STATUS,
            attached=len(self._pids),
            commands_used=self._commands,
            command_limit=self._command_limit,
            windows=self._windows,
            output=self._attach.output,
        )
        window = self._window
        if self._collecting and window is not None:
            status.processes = [self._collecting_process(p) for p in window.processes.values()]
        else:
            status.idle_left_s = max(0.0, self._idle_since + self._idle_timeout_s - time.monotonic())
        return self._reply(seq, _A.STATUS, True, [status], window if self._collecting else None)

    async def _quit(self, seq: int, why: str = "quit") -> SessionReply:
        stopped = await self._stop(seq) if self._collecting else None
        parts = [*(stopped.parts if stopped else []), SessionPart(SessionNews.QUIT, why=why)]
        return _ended(self._reply(seq, _A.QUIT, True, parts, self._window if stopped else None))

    async def _count_command(self, reply: SessionReply) -> SessionReply:
        """msprof's cap on start/stop commands: the one that reaches it is answered, then the session
        ends (stopping a window it started)."""
        self._commands += 1
        reply.commands_left = max(0, self._command_limit - self._commands)
        if self._commands < self._command_limit:
            return reply
        if self._collecting:
            reply.parts += (await self._stop(reply.seq)).parts
        reply.parts.append(SessionPart(SessionNews.COMMAND_LIMIT, command_limit=self._command_limit))
        return _ended(reply)

    def _process_gone(self, gone: Gone) -> SessionReply:
        record = gone.record
        self._pids.discard(record.host_pid)
        process = SessionProcess.of_record(record, False, gone.why)
        window = self._window.processes.get(record.host_pid) if self._window else None
        process.window = copy.deepcopy(window)
        parts = [SessionPart(SessionNews.PROCESS_GONE, [process], why=gone.why)]
        if self._pids:
            return self._reply(0, _A.NONE, False, parts)
        parts.append(SessionPart(SessionNews.TASK_ENDED))
        return _ended(self._reply(0, _A.NONE, False, parts))

    # --- helpers ------------------------------------------------------------------------------------

    @property
    def _collecting(self) -> bool:
        return self._window is not None and not self._window.done

    def _collecting_process(self, p: ProcessTrace) -> SessionProcess:
        """A process of the window being collected, with how long it has recorded and the step the
        daemon last heard of (its last heartbeat's: only what is known for sure)."""
        record = self._deps.registry.get(p.host_pid)
        since = next((at for phase, at in p.history if phase is TracePhase.RUNNING), p.updated_at)
        return SessionProcess.of_window(
            p, step=record.current_step if record is not None else 0, collecting_s=time.time() - since
        )

    def _reply(
        self,
        seq: int,
        action: SessionAction,
        ok: bool,
        parts: List[SessionPart],
        window: Optional[Trace] = None,
    ) -> SessionReply:
        processes = [SessionProcess.of_window(p) for p in (window.processes.values() if window else ())]
        return SessionReply(
            seq,
            action,
            ok,
            parts,
            processes,
            window_id=window.trace_id if window else "",
            commands_left=max(0, self._command_limit - self._commands),
        )

    def _end(self) -> None:
        """Free the processes; a window still collecting is stopped (its files are kept)."""
        self._deps.holds.release(self._request.hold.session)
        window = self._window
        if window is not None and not window.done:
            self._push_stop(window)

    def _push_stop(self, window: Trace) -> None:
        """The window's stop, to each of its processes still collecting."""
        stop = self._deps.window.stop_text()
        for process in window.processes.values():
            record = self._deps.registry.get(process.host_pid)
            if record is not None and not process.phase.final:
                self._deps.delivery.push(record, CommandKind.DYNAMIC, window.trace_id, stop, final_only=True)


_FINAL = (TracePhase.FINISHED, TracePhase.FAILED)


async def _until(trace: Trace, done: Callable[[ProcessTrace], bool], timeout: float) -> bool:
    """Wait until *done* holds for every process of *trace*; False after *timeout* seconds."""
    return await trace.changes.until(lambda: all(done(p) for p in trace.processes.values()), timeout)


def _ended(reply: SessionReply) -> SessionReply:
    """*reply* as the session's last: the parts it holds say why."""
    reply.ended = True
    return reply


def _refused(result: CommandResult, processes: List[SessionProcess]) -> SessionPart:
    """No process took it: the daemon's answer when it was refused before any, and each one's reason."""
    refusal = result.message if result.refusal is not None else ""
    return SessionPart(SessionNews.REFUSED, processes, label=result.label, refusal=refusal)
