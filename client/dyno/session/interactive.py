"""The conversation of ``dyno dynamic``: one gRPC stream each way, the user's commands, dynolog's words.

The main thread reads commands (at a ``(dyno)`` prompt on a terminal) and sends each as a request,
then waits for its answer; a reader thread prints every reply as it arrives, so that news nobody asked
for (a process exited, the idle timeout) shows at once. When dynolog ends the session while the main
thread waits for a line, the reader interrupts that read with SIGINT, as Ctrl-C would: ``input()`` and
readline then leave the terminal in order, and the main thread, seeing the session over, stops instead
of quitting. A signal interrupts only a read already blocked in the kernel: one that lands after the
main thread last ran its signal handlers but before its read blocks is handled only when the read
returns, which may be never. So the reader repeats it until the main thread has left the read, and the
session's own SIGINT handler lets only the first of them end the read. The stream and the terminal are
parameters, so that tests can drive a session without a daemon.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import queue
import signal
import subprocess
import sys
import threading
from types import FrameType
from typing import Any, Callable, Iterator, List, NamedTuple, Optional, Protocol, Tuple

from msmonitor_contract.vocabulary import DynamicAction

from ..model.dynamic import DynamicReply, DynamicRequest
from ..output import as_dict, print_json
from . import lines as session_lines

PROMPT = "(dyno) "
USAGE = """\
Commands:
  start          start a window: the processes begin collecting
  stop           end the window: each process writes one PROF_ directory
  status         where the session and each process stand
  quit, q        stop collecting if collecting, and leave (so do end of input and Ctrl-C)
  help, h        this text
  sleep SECONDS  wait before reading the next command (for scripts)
"""
ACTIONS = {
    "start": DynamicAction.START,
    "stop": DynamicAction.STOP,
    "status": DynamicAction.STATUS,
    "quit": DynamicAction.QUIT,
    "q": DynamicAction.QUIT,
}
_JOB_POLL_S = 0.2  # how often the wait for the attach answer checks that a launched job still runs
_CLOSE_S = 5.0  # how long dynolog has to close the call once the session is over
_WAKE_AGAIN_S = 0.05  # how often the reader repeats its wake-up while the main thread is still reading


class ReplyStream(Protocol):
    """What ``Daemon.dynamic(requests)`` opens: the replies, and a way to hang up."""

    def __iter__(self) -> Iterator[DynamicReply]: ...

    def cancel(self) -> bool: ...


OpenStream = Callable[[Iterator[DynamicRequest]], ReplyStream]


class Io(NamedTuple):
    """Where commands come from and answers go."""

    read: Callable[[str], str]  # as input(): show the prompt, return the next line; EOFError at the end
    show: Callable[[DynamicReply], None]  # a reply as it arrives (called on the reader thread)
    say: Callable[[str], None]  # dyno's own words (help, a prompt again), written as they are
    typed: Callable[[], str] = str  # what is typed at the prompt so far, shown again below news (str(): "")


class Ending(NamedTuple):
    by_user: bool  # quit, end of input or Ctrl-C; otherwise dynolog ended it, or the launched job exited
    attached: bool  # dynolog answered the attach with ok


def console(json: bool) -> Tuple[Io, str]:
    """The terminal, or whatever stdin and stdout are, and the prompt to show (none unless a person types).

    With ``--json`` stdout carries one JSON object per reply and nothing else.
    """
    show, say = (_print_json, _stderr) if json else (_print_text, _stdout)
    if not sys.stdin.isatty():
        return Io(input if json else _echoed_input, show, say), ""
    import readline  # once loaded, input() edits lines and keeps a history

    return (Io(input, show, say), "") if json else (Io(input, show, say, readline.get_line_buffer), PROMPT)


def _echoed_input(prompt: str) -> str:
    """A scripted command, shown as if typed at the prompt, so that a script's output reads as a session."""
    line = input()
    if line.strip():
        _stdout(f"{PROMPT}{line.strip()}\n")
    return line


class Session:
    """One ``dyno dynamic`` session: :meth:`run` it once."""

    def __init__(self, io: Io, prompt: str = "") -> None:
        self._io = io
        self._prompt = prompt
        self._requests: queue.Queue[Optional[DynamicRequest]] = queue.Queue()  # None: no more
        self._seq = 0
        self._reading = False  # the main thread waits for a line: the end of the session interrupts it
        self._changed = threading.Condition()  # guards what the reader learns, below
        self._answered = 0  # the highest seq answered
        self._attached = False
        self._ended = False  # a reply said the session is over
        self._closed = False  # the reply stream ended
        self._cancelled = False  # dyno hung up: the stream's CANCELLED error is its own doing
        self._error: Optional[Exception] = None  # why the stream failed

    def run(
        self, open_stream: OpenStream, attach: Any, job: Optional[subprocess.Popen[bytes]] = None
    ) -> Ending:
        """Attach, then send the commands read until the user or dynolog ends the session.

        With *job* (launch mode), stop waiting for the attach answer when the job exits first. Runs on
        the main thread, where Python handles SIGINT. A stream error is raised here.
        """
        self._main = threading.get_ident()  # the thread the reader interrupts
        stream = open_stream(iter(self._requests.get, None))
        reader = threading.Thread(target=self._read, args=(stream,), name="dynamic-replies", daemon=True)
        reader.start()
        previous = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, self._on_sigint)
        try:
            by_user = self._converse(attach, job)
        finally:
            # The last wake-up is handled by now: its handler runs at the first bytecode after it lands.
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
            self._hang_up(stream, reader)
        if self._error is not None:
            raise self._error
        return Ending(by_user, self._attached)

    # --- the main thread -----------------------------------------------------------------------------

    def _converse(self, attach: Any, job: Optional[subprocess.Popen[bytes]]) -> bool:
        """True when the user ended the session (and it was quit), False when it ended otherwise."""
        try:
            if not self._ask(DynamicAction.ATTACH, attach, job):
                return False
            while not self._over():
                line = self._next_line()
                if line is None:  # end of input, Ctrl-C, or the session ended meanwhile
                    break
                action = self._command(line)
                if action is DynamicAction.QUIT:
                    break
                if action is not None:
                    self._ask(action)
        except KeyboardInterrupt:  # Ctrl-C while waiting for an answer, or the reader's wake-up
            pass
        if self._over():
            return False
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C again: stop waiting for dynolog
            self._ask(DynamicAction.QUIT)
        return True

    def _ask(
        self,
        action: DynamicAction,
        attach: Optional[Any] = None,
        job: Optional[subprocess.Popen[bytes]] = None,
    ) -> bool:
        """Send one request and wait for its answer (the reader prints it) or the end of the session;
        False when *job* exited first."""
        self._seq += 1
        self._requests.put(DynamicRequest(seq=self._seq, action=action, attach=attach))
        with self._changed:
            while self._answered < self._seq and not self._over():
                if job is not None and job.poll() is not None:
                    return False
                self._changed.wait(_JOB_POLL_S if job is not None else None)
        return True

    def _next_line(self) -> Optional[str]:
        """The next line typed; None at the end of input, at Ctrl-C, or when the session ended."""
        # Set before looking at the session, while the reader ends the session before looking at this:
        # either this sees the end, or the reader sees the read and interrupts it.
        self._reading = True
        try:
            if not self._over():
                return self._io.read(self._prompt)
        except (EOFError, KeyboardInterrupt):
            if self._prompt and not self._over():
                self._io.say("\n")  # the answer to the quit this means goes below the prompt
        finally:
            self._reading = False
            with self._changed:  # the reader stops repeating its wake-up
                self._changed.notify_all()
        return None

    def _command(self, line: str) -> Optional[DynamicAction]:
        """The action *line* asks of dynolog; None for what dyno does itself (help, sleep) or refuses."""
        name, *rest = line.split() or [""]
        if not name:
            return None
        if name in ACTIONS and not rest:
            return ACTIONS[name]
        seconds = _seconds(rest) if name == "sleep" else None
        if seconds is not None:
            with self._changed:  # a sleep ends early with the session
                self._changed.wait_for(self._over, seconds)
        elif name in ("help", "h") and not rest:
            self._io.say(USAGE)
        else:
            self._io.say(f"not a command: {line.strip()}\n{USAGE}")
        return None

    def _hang_up(self, stream: ReplyStream, reader: threading.Thread) -> None:
        self._requests.put(None)  # the end of the requests: gRPC half-closes the call
        if self._over():  # dynolog closes the call: let the reader print its last words first
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C again: stop waiting
                reader.join(_CLOSE_S)
        with self._changed:
            self._cancelled = True
        stream.cancel()  # nothing when dynolog closed the call; otherwise, dynolog sees the client go

    def _over(self) -> bool:
        with self._changed:
            return self._ended or self._closed

    def _on_sigint(self, signum: int, frame: Optional[FrameType]) -> None:
        """SIGINT during the conversation: a person's Ctrl-C, or, once the session is over, the reader's
        wake-up. That is repeated until the read is left (:meth:`_wake`): the first one that finds the
        main thread reading ends the read; the rest, and any that land after the read, change nothing."""
        if not (self._ended or self._closed):  # no lock: the handler may run while this thread holds it
            signal.default_int_handler(signum, frame)  # Ctrl-C: KeyboardInterrupt, as always
        elif self._reading:
            self._reading = False  # no later wake-up raises, and the reader stops sending them
            raise KeyboardInterrupt

    # --- the reader thread ---------------------------------------------------------------------------

    def _read(self, stream: ReplyStream) -> None:
        error: Optional[Exception] = None
        try:
            for reply in stream:
                self._receive(reply)
        except Exception as exc:  # a gRPC error, or a failure to print: the main thread raises it
            error = exc
        with self._changed:
            woken = self._ended  # by the reply that ended the session
            self._closed = True
            if error is not None and not self._cancelled:
                self._error = error
            self._changed.notify_all()
        if not woken:
            self._wake()

    def _receive(self, reply: DynamicReply) -> None:
        news_at_prompt = reply.seq == 0 and self._reading and bool(self._prompt)
        if news_at_prompt:
            self._io.say("\n")  # below the prompt, not after it
        self._io.show(reply)
        with self._changed:  # after showing it: whoever waits for this reply finds it printed
            self._answered = max(self._answered, reply.seq)
            self._attached |= reply.seq == 1 and reply.ok
            self._ended |= reply.ended
            self._changed.notify_all()
        if reply.ended:
            self._wake()
        elif news_at_prompt:
            self._io.say(self._prompt + self._io.typed())

    def _wake(self) -> None:
        """Interrupt the main thread's wait for a line (a wait for an answer sees the condition change),
        again and again until it has left the read: a SIGINT that lands just before the read blocks is
        lost on it."""
        with self._changed:
            while self._reading:
                signal.pthread_kill(self._main, signal.SIGINT)
                self._changed.wait(_WAKE_AGAIN_S)


def _seconds(words: List[str]) -> Optional[float]:
    """``sleep``'s one argument, when it is a number of seconds."""
    try:
        seconds = float(words[0]) if len(words) == 1 else -1.0
    except ValueError:
        return None
    return seconds if seconds >= 0 and math.isfinite(seconds) else None


def _print_text(reply: DynamicReply) -> None:
    words = session_lines.text(reply)
    if words:
        print(words, flush=True)


def _print_json(reply: DynamicReply) -> None:
    """One line each (a stream of objects): the reply with its words in ``message``; its parts are what
    the words say, so they are not repeated."""
    shown = dataclasses.replace(reply, message=session_lines.text(reply), parts=())
    print_json(as_dict(shown), indent=None)


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
