"""A ``dyno dynamic`` session's answers in words: the daemon sends what happened (``SessionPart``s with
their facts), and this module words each part, as ``dyno trace`` words a trace. A reply without parts
(a daemon from before the parts) is shown as the text it carries."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

from msmonitor_contract.vocabulary import DynamicAction, SessionNews, TracePhase

from ..model.dynamic import DynamicProcess, DynamicReply, SessionPart
from ..model.traces import TraceProcess
from ..output import size_text
from ..tracing.progress import phase_name


def text(reply: DynamicReply) -> str:
    """The whole reply, one line each thing it says."""
    if not reply.parts:
        return reply.message
    return "\n".join(line for part in reply.parts for line in _WORDS.get(part.news, _unknown)(part, reply))


def _attached(part: SessionPart, reply: DynamicReply) -> List[str]:
    n = part.attached
    header = (
        f"attached to {n} process{'es' if n > 1 else ''}; windows go under {part.output} on {part.hostname}; "
        "type help for the commands"
    )
    return [header, *(_attach_line(p) for p in part.processes)]


def _attach_line(p: DynamicProcess) -> str:
    return (
        f"{_who(p)}: attached at step {p.step} ({p.backend})"
        if p.ok
        else f"{_who(p)}: not attached: {p.detail}"
    )


def _refused(part: SessionPart, reply: DynamicReply) -> List[str]:
    first = part.refusal or f"{part.label}: no process took it"
    if reply.action is DynamicAction.ATTACH:
        return [first, *(_attach_line(p) for p in part.processes)]
    return [first, *(f"{_who(p)}: not started: {p.detail}" for p in part.processes)]


def _started(part: SessionPart, reply: DynamicReply) -> List[str]:
    return [line for p in part.processes for line in _start_lines(p)]


def _start_lines(p: DynamicProcess) -> List[str]:
    w = _window(p)
    if w.phase is TracePhase.FAILED:
        return [f"{_who(p)}: not started: {w.error}"]
    if w.phase is TracePhase.RUNNING:
        when = f"at step {w.start_step}" if w.start_step > 0 else "at once (it counts no steps)"
        line = f"{_who(p)}: started {when}"
    elif w.phase is TracePhase.READY:
        line = f"{_who(p)}: starts at step {w.start_step}, its next step boundary"
    else:
        line = f"{_who(p)}: start sent, not yet taken ({phase_name(w.phase)})"
    return [line, *(f"  warning: {warning}" for warning in w.warnings)]


def _stopped(part: SessionPart, reply: DynamicReply) -> List[str]:
    lines: List[str] = []
    for p in part.processes:
        w = _window(p)
        if w.phase is TracePhase.FINISHED:
            lines += [f"{_who(p)}: {_written(p)}", *(f"  warning: {warning}" for warning in p.new_warnings)]
        elif w.phase is TracePhase.FAILED:
            lines.append(f"{_who(p)}: failed: {w.error}")
        else:
            follow = f"`dyno trace {part.window_id}` follows it"
            lines.append(f"{_who(p)}: still writing after {part.waited_s:g} s; {follow}")
    return lines


def _status(part: SessionPart, reply: DynamicReply) -> List[str]:
    n, windows = part.attached, part.windows
    held = (
        f"attached to {n} process{'es' if n != 1 else ''}; {part.commands_used} of {part.command_limit} "
        "start/stop commands used"
    )
    if part.processes:  # a window is collecting
        return [held, *(_collecting(p, part.output) for p in part.processes)]
    idle = (
        f"idle: {windows} window{'s' if windows != 1 else ''} so far; the session ends after "
        f"{part.idle_left_s:.0f} s more without collecting"
    )
    return [held, idle]


def _collecting(p: DynamicProcess, output: str) -> str:
    w = _window(p)
    if w.phase is TracePhase.READY:
        return f"{_who(p)}: starts at step {w.start_step}, its next step boundary"
    if w.phase is not TracePhase.RUNNING:
        return f"{_who(p)}: {phase_name(w.phase)}"
    steps = ""
    if w.start_step > 0:  # the step the daemon knows is the last heartbeat's: only what it knows for sure
        steps = f", steps {w.start_step}-{p.step}" if p.step > w.start_step else f", from step {w.start_step}"
    return f"{_who(p)}: collecting for {p.collecting_s:.1f} s{steps}, output {output}"


def _gone(part: SessionPart, reply: DynamicReply) -> List[str]:
    p = part.processes[0]
    lines = [f"{_who(p)} {part.why} at step {p.step}"]
    w = _window(p)
    if p.window is not None and w.phase is TracePhase.FINISHED and w.start_step >= 0:
        lines.append(f"  its window was closed: {_written(p)}")
    elif p.window is not None and w.phase is TracePhase.FAILED:
        lines.append(f"  its window: {w.error}")
    return lines


def _window(p: DynamicProcess) -> TraceProcess:
    """The process's window as the daemon last saw it (an empty one when it sent none)."""
    return p.window if p.window is not None else TraceProcess()


def _who(p: DynamicProcess) -> str:
    pid = f"pid {p.pid}" if p.pid == p.host_pid else f"pid {p.pid} (host pid {p.host_pid})"
    return f"{pid} (rank {p.rank})" if p.rank >= 0 else pid


def _written(p: DynamicProcess) -> str:
    w = _window(p)
    steps = f", steps {w.start_step}-{w.stop_step - 1}" if w.start_step > 0 else ""
    n = len(w.files)
    return f"{w.output.rstrip('/')}/  ({n} file{'s' if n != 1 else ''}, {size_text(p.size_bytes)}){steps}"


def _unknown(part: SessionPart, reply: DynamicReply) -> List[str]:
    return [f"(news this dyno does not know: {part.news})"]  # a newer daemon's


Words = Callable[[SessionPart, DynamicReply], List[str]]
_WORDS: Dict[Optional[SessionNews], Words] = {
    SessionNews.ATTACHED: _attached,
    SessionNews.REFUSED: _refused,
    SessionNews.ALREADY_ATTACHED: lambda part, reply: ["already attached: start, stop, status or quit"],
    SessionNews.ALREADY_STARTED: lambda part, reply: [f"already started (window {part.window_id})"],
    SessionNews.STARTED: _started,
    SessionNews.NOT_STARTED: lambda part, reply: ["not started"],
    SessionNews.STOPPED: _stopped,
    SessionNews.STATUS: _status,
    SessionNews.QUIT: lambda part, reply: [f"{part.why}: the job keeps running; attach again any time"],
    SessionNews.IDLE_TIMEOUT: lambda part, reply: [
        f"no collection for {part.idle_timeout_s:g} s (--idle-timeout): the session ended; "
        "the job keeps running, attach again any time"
    ],
    SessionNews.COMMAND_LIMIT: lambda part, reply: [
        f"this session used its {part.command_limit} start/stop commands (--command-limit): it ended; "
        "attach again to go on"
    ],
    SessionNews.PROCESS_GONE: _gone,
    SessionNews.TASK_ENDED: lambda part, reply: ["the task ended: every attached process has exited"],
}
