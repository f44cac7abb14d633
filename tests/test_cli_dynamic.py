"""`dyno dynamic` without a daemon: usage errors, what the attach carries, and the session loop against a
scripted stand-in for dynolog's side of the Dynamic stream."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import pytest

import dyno.edge.connection
from dyno.app import parsed
from dyno.commands import dynamic
from dyno.declared import request as attach_request
from dyno.main import main
from dyno.model.dynamic import DynamicReply
from dyno.session.interactive import USAGE, Ending, Io, Session
from dynoproto import dynolog_pb2 as pb
from dynoproto.convert import to_model, to_proto
from harness import wait_until
from msmonitor_contract.kinds import DYNAMIC
from test_cli import loaded

Step = Union[pb.DynamicReply, float]  # a reply to send, or seconds to wait before the next one
Script = Callable[[pb.DynamicRequest], Sequence[Step]]


def answer(request: pb.DynamicRequest, ok: bool = True, ended: bool = False) -> pb.DynamicReply:
    name = pb.DynamicAction.Name(request.action)
    quitting = request.action == pb.DYNAMIC_ACTION_QUIT
    return pb.DynamicReply(
        seq=request.seq, action=request.action, ok=ok, message=f"{name} ok", ended=ended or quitting
    )


def answer_all(request: pb.DynamicRequest) -> Sequence[Step]:
    return [answer(request)]


def news(message: str, ended: bool) -> pb.DynamicReply:
    return pb.DynamicReply(seq=0, message=message, ended=ended)


class FakeDynolog:
    """Stands for ``stub.Dynamic``: takes the request iterator, answers each request as *script* says."""

    def __init__(self, script: Script = answer_all) -> None:
        self.script = script
        self.sent: List[pb.DynamicRequest] = []
        self.hung_up = threading.Event()
        self._requests: Iterator[pb.DynamicRequest] = iter(())

    def __call__(self, requests: Iterator[pb.DynamicRequest]) -> FakeDynolog:
        self._requests = requests
        return self

    def __iter__(self) -> Iterator[pb.DynamicReply]:
        for request in self._requests:
            self.sent.append(request)
            for step in self.script(request):
                if not isinstance(step, pb.DynamicReply):
                    if self.hung_up.wait(step):
                        return
                    continue
                yield step
                if step.ended:
                    return

    def cancel(self) -> bool:
        self.hung_up.set()
        return True

    def actions(self) -> List[Tuple[int, str]]:
        return [(r.seq, pb.DynamicAction.Name(r.action).removeprefix("DYNAMIC_ACTION_")) for r in self.sent]

    def seen_by_the_session(self, requests: Iterator[Any]) -> Iterator[DynamicReply]:
        """The fake as the gRPC edge (``Daemon.dynamic``) shows it to a session: the session's requests
        go out as messages, the replies come back in the client's model."""
        self(to_proto(pb.DynamicRequest, r) for r in requests)
        return _Replies(self)


class _Replies:
    def __init__(self, daemon: FakeDynolog) -> None:
        self._daemon = daemon

    def __iter__(self) -> Iterator[DynamicReply]:
        return (to_model(DynamicReply, reply) for reply in self._daemon)

    def cancel(self) -> bool:
        return self._daemon.cancel()


Line = Union[str, Callable[[List[str]], str]]  # a callable gets what was printed so far


def converse(
    lines: Sequence[Line], script: Script = answer_all, prompt: str = "", job: Any = None
) -> Tuple[Ending, FakeDynolog, List[str]]:
    """Run a session that reads *lines* (a callable is called for its line); what it printed, in order."""
    printed: List[str] = []
    feed = iter(lines)

    def read(shown: str) -> str:
        if shown:
            printed.append(shown)
        line = next(feed, None)
        if line is None:
            raise EOFError
        return line if isinstance(line, str) else line(printed)

    io = Io(read, lambda reply: printed.append(reply.message), printed.append)
    daemon = FakeDynolog(script)
    ending = Session(io, prompt).run(daemon.seen_by_the_session, DYNAMIC.model(), job)
    return ending, daemon, printed


LONG_SLEEP_S = 30  # under the suite's minute a test: a sleep that runs its length fails the assertion


def blocked(printed: List[str]) -> str:
    """A person who types nothing: only a signal ends this read."""
    time.sleep(30)
    raise AssertionError("the read was not interrupted")


# --- the session loop ------------------------------------------------------------------------------


def test_commands_go_out_in_order_and_local_ones_stay_local():
    lines = ["start", "", "sleep 0", "help", "bogus", "sleep x", "status", "stop"]
    ending, daemon, printed = converse(lines)
    assert daemon.actions() == [(1, "ATTACH"), (2, "START"), (3, "STATUS"), (4, "STOP"), (5, "QUIT")]
    assert ending == Ending(by_user=True, attached=True)
    answers = [p for p in printed if p.endswith(" ok")]
    assert answers == [f"DYNAMIC_ACTION_{a} ok" for a in ("ATTACH", "START", "STATUS", "STOP", "QUIT")]
    assert printed.count(USAGE) == 1  # help
    assert f"not a command: bogus\n{USAGE}" in printed
    assert f"not a command: sleep x\n{USAGE}" in printed


@pytest.mark.parametrize("word", ["quit", "q"])
def test_quit_sends_quit_and_reads_no_further(word):
    ending, daemon, _ = converse(["start", word, "stop"])
    assert daemon.actions() == [(1, "ATTACH"), (2, "START"), (3, "QUIT")]
    assert ending.by_user


def test_end_of_input_and_ctrl_c_quit():
    def ctrl_c(printed: List[str]) -> str:
        raise KeyboardInterrupt

    for lines in ([], [ctrl_c]):
        ending, daemon, _ = converse(lines)
        assert daemon.actions() == [(1, "ATTACH"), (2, "QUIT")]
        assert ending == Ending(by_user=True, attached=True)


def test_a_refused_attach_ends_the_session_before_any_read():
    ending, daemon, printed = converse(["start"], lambda r: [answer(r, ok=False, ended=True)])
    assert ending == Ending(by_user=False, attached=False)
    assert daemon.actions() == [(1, "ATTACH")]
    assert printed == ["DYNAMIC_ACTION_ATTACH ok"]  # the daemon's words; no prompt was shown


def test_news_that_ends_the_session_interrupts_a_blocked_read():
    def script(request: pb.DynamicRequest) -> Sequence[Step]:
        return [answer(request), 0.2, news("idle for 1800s: session ended", ended=True)]

    ending, daemon, printed = converse([blocked], script)  # blocked() fails unless the news interrupts it
    assert ending == Ending(by_user=False, attached=True)
    assert daemon.actions() == [(1, "ATTACH")]  # no quit after dynolog ended it
    assert printed[-1] == "idle for 1800s: session ended"


WAKE_BOUND_S = 5.0  # a session of this test lasts milliseconds; one still reading after this missed its end
TRIES = 300


def test_the_end_of_the_session_interrupts_a_read_that_has_barely_begun(monkeypatch):
    """dynolog ends the session just as the main thread goes to read: a SIGINT that lands after the
    thread last ran its handlers but before its read blocks does not interrupt that read, so the wake-up
    must come again. Each try is bounded: a read the wake-up missed is given a line after WAKE_BOUND_S."""
    missed: List[int] = []

    def late_read(shown: str) -> str:
        late = time.perf_counter() + random.random() / 1000
        while time.perf_counter() < late:  # bytecode, where the reader's signal may land first
            pass
        return input()

    def unblock(write: int) -> None:
        missed.append(write)
        os.write(write, b"\n")

    io = Io(late_read, lambda reply: None, lambda text: None)
    switch_s = sys.getswitchinterval()
    sys.setswitchinterval(switch_s / 100)  # the threads take turns often: the gap is hit within TRIES
    try:
        attempt = 0
        while attempt < TRIES and not missed:
            attempt += 1
            read, write = os.pipe()
            ending = [random.random() / 1000, news("session ended", ended=True)]
            stream = FakeDynolog(lambda r, ending=ending: [answer(r), *ending])
            bound = threading.Timer(WAKE_BOUND_S, unblock, (write,))
            with open(read) as stdin, open(write, "wb"):
                monkeypatch.setattr(sys, "stdin", stdin)
                bound.start()
                Session(io).run(stream.seen_by_the_session, DYNAMIC.model())
                bound.cancel()
                bound.join()
    finally:
        sys.setswitchinterval(switch_s)
    assert not missed, f"try {attempt} of {TRIES}: the read went on after dynolog ended the session"


def test_sleep_waits_and_ends_early_with_the_session():
    started = time.monotonic()
    converse(["sleep 0.3"])
    assert time.monotonic() - started >= 0.3

    def script(request: pb.DynamicRequest) -> Sequence[Step]:
        return [answer(request), 0.1, news("command limit reached", ended=True)]

    # Against the sleep's own length, not a guess at the machine's speed: only a sleep that ended early
    # returns before it.
    started = time.monotonic()
    ending, daemon, _ = converse([f"sleep {LONG_SLEEP_S}", "start"], script)
    assert time.monotonic() - started < LONG_SLEEP_S, "the sleep ran its length"
    assert ending == Ending(by_user=False, attached=True) and daemon.actions() == [(1, "ATTACH")]


def test_news_shows_at_once_below_the_prompt_and_the_prompt_comes_back():
    def script(request: pb.DynamicRequest) -> Sequence[Step]:
        if request.action == pb.DYNAMIC_ACTION_ATTACH:
            return [answer(request), 0.1, news("pid 4243 exited", ended=False)]
        return answer_all(request)

    def after_the_news(printed: List[str]) -> str:
        # Polled every 10 ms: the session's timing is under test, not the wait's back-off.
        wait_until(
            lambda: "pid 4243 exited" in printed, 5, "the news to show while the user types", pause=0.01
        )
        return "quit"

    _, daemon, printed = converse([after_the_news], script, "(dyno) ")
    assert printed[1:5] == ["(dyno) ", "\n", "pid 4243 exited", "(dyno) "]
    assert daemon.actions() == [(1, "ATTACH"), (2, "QUIT")]


def test_a_stream_error_is_raised_to_the_caller():
    def script(request: pb.DynamicRequest) -> Sequence[Step]:
        raise RuntimeError("stream broke")

    with pytest.raises(RuntimeError, match="stream broke"):
        converse(["start"], script)


def test_a_launched_job_that_exits_before_the_answer_stops_the_wait():
    job = subprocess.Popen(["sh", "-c", "exit 3"])
    ending, daemon, _ = converse(["start"], lambda r: [60.0], job=job)  # dynolog waits for registration
    assert ending == Ending(by_user=False, attached=False)
    assert daemon.hung_up.is_set()


# --- the command: usage errors ----------------------------------------------------------------------


def run_dyno(*argv: str) -> int:
    try:
        main(list(argv))
    except SystemExit as exit:
        return int(exit.code or 0)
    return 0


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (("dynamic",), "name the processes: --pid N,N"),
        (("dynamic", "--pid", "5", "--", "python", "t.py"), "not both (the command: python t.py)"),
        (("--hostname", "node01", "dynamic", "--pid", "5"), "--output is required with a remote daemon"),
        (
            ("--hostname", "node01", "dynamic", "--output", "/p", "--", "python"),
            "launch mode starts the job on this host",
        ),
        (("dynamic", "--pid", "5", "--task-time", "l9"), "--task-time: must be one of l0, l1, l2, on, off"),
        (("dynamic", "--pid", "5", "--aicpu=maybe"), "--aicpu: must be on or off, got 'maybe'"),
        (("dynamic", "--pid", "5", "--type", "json"), "--type: must be one of text, db"),
    ],
)
def test_usage_errors_exit_2_and_name_the_problem(capsys, argv, error):
    assert run_dyno(*argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dyno: ") and error in err


def test_launch_mode_refuses_profiling_options(capsys, monkeypatch):
    monkeypatch.setenv("PROFILING_OPTIONS", '{"output": "/tmp"}')
    assert run_dyno("dynamic", "--", "python", "t.py") == 2
    assert capsys.readouterr().err.startswith("dyno: PROFILING_OPTIONS is set")


def test_usage_errors_start_without_grpc():
    assert loaded("grpc,google", "dynamic") == []


@pytest.mark.parametrize(
    ("spelling", "value"), [("--aicpu=on", True), ("--aicpu", True), ("--aicpu=off", False)]
)
def test_msprof_switches_take_on_and_off(spelling, value):
    args = parsed(dynamic.COMMAND, ["--pid", "5", spelling, "--hccl"])
    options = attach_request(DYNAMIC, dynamic.FLAGS, args).options
    assert (options.aicpu, options.hccl, options.l2) == (value, True, False)


# --- the command against a stand-in daemon ------------------------------------------------------------


@pytest.fixture
def fake_dynolog(monkeypatch) -> FakeDynolog:
    """``dyno.edge.connection.connect`` yields a stub whose Dynamic is this fake (and whose GetStatus
    answers)."""
    daemon = FakeDynolog()

    @contextlib.contextmanager
    def connect(target: Any, feature: str) -> Iterator[Any]:
        yield SimpleNamespace(Dynamic=daemon, GetStatus=lambda request, timeout: pb.GetStatusResponse())

    monkeypatch.setattr(dyno.edge.connection, "connect", connect)
    return daemon


@pytest.fixture
def typed(monkeypatch) -> Iterator[Callable[[Optional[str]], None]]:
    """Set what stdin holds: the text, then its end; None: a pipe that stays open with nothing in it."""
    pipes: List[int] = []

    def set_stdin(text: Optional[str]) -> None:
        read, write = os.pipe()
        if text is None:
            pipes.append(write)
        else:
            os.write(write, text.encode())
            os.close(write)
        monkeypatch.setattr(sys, "stdin", os.fdopen(read))

    yield set_stdin
    for fd in pipes:
        os.close(fd)


def test_the_attach_carries_the_flags_and_who_asks(fake_dynolog, typed, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    typed("start\nstop\n")
    argv = ["dynamic", "--pids", "5,6", "--output", "prof", "--aicpu", "--task-time=l1", "--type", "db"]
    assert run_dyno(*argv, "--host-sys", "cpu,mem", "--idle-timeout", "60") == 0
    assert fake_dynolog.actions() == [(1, "ATTACH"), (2, "START"), (3, "STOP"), (4, "QUIT")]
    attach = fake_dynolog.sent[0].attach
    assert list(attach.targets.pids) == [5, 6]
    assert attach.output == str(tmp_path / "prof")
    assert (attach.options.aicpu, attach.options.task_time, attach.options.export_type) == (True, "l1", "db")
    assert list(attach.options.activities) == ["CPU", "NPU"] and list(attach.options.host_sys) == [
        "cpu",
        "mem",
    ]
    assert (attach.idle_timeout_s, attach.command_limit, attach.wait_registration_s) == (60, 100, 0)
    assert (attach.client.pid, attach.client.uid) == (os.getpid(), os.getuid())


def test_a_local_daemon_writes_here_by_default(fake_dynolog, typed, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    typed("")
    assert run_dyno("dynamic", "--pid", "5") == 0
    assert fake_dynolog.sent[0].attach.output == str(tmp_path)


def test_json_prints_one_object_per_reply_and_nothing_else(fake_dynolog, typed, capsys):
    typed("status\n")
    assert run_dyno("--json", "dynamic", "--pid", "5", "--output", "/p") == 0
    replies = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["seq"], r["action"], r["ended"]) for r in replies] == [
        (1, "DYNAMIC_ACTION_ATTACH", False),
        (2, "DYNAMIC_ACTION_STATUS", False),
        (3, "DYNAMIC_ACTION_QUIT", True),
    ]


def _stopped_and_limited(request: pb.DynamicRequest) -> Sequence[Step]:
    """A stop that is also the session's last command: two parts, worded by dyno."""
    window = pb.TraceProcess(
        pid=7,
        host_pid=7,
        rank=0,
        phase=pb.TRACE_PHASE_FINISHED,
        start_step=12,
        stop_step=15,
        output="/p/PROF_000001_x/",
        files=["/p/PROF_000001_x/a", "/p/PROF_000001_x/b"],
    )
    stopped = pb.SessionPart(
        news=pb.SESSION_NEWS_STOPPED,
        window_id="9",
        processes=[
            pb.DynamicProcess(
                pid=7,
                host_pid=7,
                rank=0,
                ok=True,
                window=window,
                size_bytes=18_200_000,
                new_warnings=["no NPU here"],
            )
        ],
    )
    limit = pb.SessionPart(news=pb.SESSION_NEWS_COMMAND_LIMIT, command_limit=2)
    reply = answer(request, ended=request.action == pb.DYNAMIC_ACTION_STOP)
    reply.message = ""
    if request.action == pb.DYNAMIC_ACTION_STOP:
        reply.parts.extend([stopped, limit])
    return [reply]


@pytest.mark.parametrize("json_out", [False, True])
def test_dyno_words_the_parts_of_an_answer(fake_dynolog, typed, capsys, json_out):
    fake_dynolog.script = _stopped_and_limited
    typed("stop\n")
    run_dyno(*(["--json"] if json_out else []), "dynamic", "--pid", "7", "--output", "/p")
    out = capsys.readouterr().out
    words = [
        "pid 7 (rank 0): /p/PROF_000001_x/  (2 files, 18.2 MB), steps 12-14",
        "  warning: no NPU here",
        "this session used its 2 start/stop commands (--command-limit): it ended; attach again to go on",
    ]
    if json_out:  # the words in "message", the parts not repeated
        stop = [json.loads(line) for line in out.splitlines()][1]
        assert stop["message"] == "\n".join(words) and not stop.get("parts")
    else:
        assert "\n".join(words) in out


def test_when_dynolog_ends_the_session_dyno_exits_1(fake_dynolog, typed, capsys):
    fake_dynolog.script = lambda r: [answer(r), 0.1, news("command limit reached", ended=True)]
    typed(None)
    assert run_dyno("dynamic", "--pid", "5", "--output", "/p") == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["DYNAMIC_ACTION_ATTACH ok", "command limit reached"]
    assert err == "dyno: dynolog ended the session\n"


def test_a_refused_attach_exits_1(fake_dynolog, typed, capsys):
    fake_dynolog.script = lambda r: [answer(r, ok=False, ended=True)]
    typed("start\n")
    assert run_dyno("dynamic", "--pid", "5", "--output", "/p") == 1
    assert capsys.readouterr().err == "dyno: dynolog did not attach\n"


# --- launch mode --------------------------------------------------------------------------------------


# Fixtures and the case's parameters, each used: nothing here travels together to group.
@pytest.mark.parametrize(
    ("job", "code", "words"),
    [("exit 7", 7, "exited with code 7"), ("kill -TERM $$", 143, "was killed by SIGTERM")],
)
def test_a_launched_job_that_exits_gives_dyno_its_status(  # noqa: PLR0913
    fake_dynolog, typed, capsys, tmp_path, job, code, words
):
    fake_dynolog.script = lambda r: [answer(r), 0.4, news("every process exited", ended=True)]
    typed(None)
    log = tmp_path / "app.log"
    script = f'echo "use daemon: $MSMONITOR_USE_DAEMON"; sleep 0.2; {job}'  # exits after the attach
    argv = [
        "dynamic",
        "--output",
        "/p",
        "--launch-timeout",
        "5",
        "--app-log",
        str(log),
        "--",
        "sh",
        "-c",
        script,
    ]
    assert run_dyno(*argv) == code
    assert capsys.readouterr().err == f"dyno: the job {words}\n"
    attach = fake_dynolog.sent[0].attach
    assert len(attach.targets.pids) == 1 and attach.wait_registration_s == 5
    assert log.read_text() == "use daemon: 1\n"


def test_a_job_that_exits_before_registering_is_named(fake_dynolog, typed, capsys):
    fake_dynolog.script = lambda r: [60.0]  # dynolog still waits for the job to register
    typed(None)
    assert run_dyno("dynamic", "--output", "/p", "--", "sh", "-c", "exit 0") == 1
    assert capsys.readouterr().err == (
        "dyno: the job exited with code 0 before it registered with dynolog"
        " (is msmonitor-plugin installed in its Python?)\n"
    )


def test_the_job_keeps_running_when_dyno_quits(fake_dynolog, typed, capsys):
    typed("quit\n")
    assert run_dyno("dynamic", "--output", "/p", "--", "sleep", "30") == 0
    pid = fake_dynolog.sent[0].attach.targets.pids[0]
    try:
        assert capsys.readouterr().err == f"dyno: the job keeps running (pid {pid})\n"
        os.kill(pid, 0)  # still there
    finally:
        os.kill(pid, 15)  # sleep ends at once
        os.waitpid(pid, 0)


def _ended(pid: int) -> bool:
    """*pid* has exited: gone, or a zombie its parent (dyno, for the launched job) has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def _reports_the_exit(request: pb.DynamicRequest) -> Iterator[Step]:
    """dynolog's side: the attach answered, then the session ended when the attached job exits."""
    yield answer(request)
    pid = request.attach.targets.pids[0]
    while not _ended(pid):
        yield 0.05
    yield news("every process exited", ended=True)


def _sigterm_dyno_once(fake_dynolog: FakeDynolog, attached: bool) -> threading.Thread:
    """A SIGTERM to this process (dyno runs in it), once dyno sent its attach (and it was answered)."""

    def send() -> None:
        wait_until(lambda: bool(fake_dynolog.sent), what="the attach")
        time.sleep(0.3 if attached else 0.1)
        os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


@pytest.mark.parametrize(
    ("trap", "code", "words"),
    [("", 143, "was killed by SIGTERM"), ("trap 'exit 5' TERM; ", 5, "exited with code 5")],
)
def test_sigterm_goes_on_to_the_launched_job_and_dyno_exits_with_its_status(  # noqa: PLR0913
    fake_dynolog, typed, capfd, tmp_path, trap, code, words
):
    """As msprof's dynamic mode: the job (its own session, out of reach of dyno's terminal) gets the
    SIGTERM, all of its process group (here a grandchild too); dyno waits for it and exits as it did."""
    fake_dynolog.script = _reports_the_exit
    typed(None)  # nobody types: the session runs until the job's exit ends it
    before = signal.getsignal(signal.SIGTERM)
    grandchild = tmp_path / "grandchild"
    script = f"{trap}sleep 30 & echo $! > {grandchild}; wait"
    sender = _sigterm_dyno_once(fake_dynolog, attached=True)
    assert run_dyno("dynamic", "--output", "/p", "--", "sh", "-c", script) == code
    sender.join()
    pid = fake_dynolog.sent[0].attach.targets.pids[0]
    err = capfd.readouterr().err
    assert f"dyno: SIGTERM sent on to the job (pid {pid}); waiting for it\n" in err
    assert err.endswith(f"dyno: the job {words}\n")
    wait_until(lambda: _ended(int(grandchild.read_text())), what="the grandchild's end")
    assert signal.getsignal(signal.SIGTERM) == before  # dyno's handler is gone with the session


def test_sigterm_before_the_job_registered_gives_its_status_not_a_plugin_hint(fake_dynolog, typed, capfd):
    fake_dynolog.script = lambda r: [60.0]  # dynolog still waits for the job to register
    typed(None)
    sender = _sigterm_dyno_once(fake_dynolog, attached=False)
    assert run_dyno("dynamic", "--output", "/p", "--", "sleep", "30") == 143
    sender.join()
    assert capfd.readouterr().err.endswith("dyno: the job was killed by SIGTERM\n")


def test_a_job_that_cannot_start_exits_127(fake_dynolog, typed, capsys):
    typed("")
    assert run_dyno("dynamic", "--output", "/p", "--", "/no/such/job") == 127
    assert capsys.readouterr().err == "dyno: cannot start /no/such/job: No such file or directory\n"
    assert fake_dynolog.sent == []


# --- dyno processes ---------------------------------------------------------------------------------


def test_processes_show_who_holds_them_only_when_someone_does(monkeypatch, capsys):
    held = pb.ProcessInfo(pid=4242, rank=0, held_by="alice@login1 (dyno pid 77)")
    for processes, column in (([held, pb.ProcessInfo(pid=4243)], True), ([pb.ProcessInfo(pid=4243)], False)):
        reply = pb.ListProcessesResponse(processes=processes)

        @contextlib.contextmanager
        def connect(target: Any, feature: str, reply: pb.ListProcessesResponse = reply) -> Iterator[Any]:
            yield SimpleNamespace(ListProcesses=lambda request, timeout: reply)

        monkeypatch.setattr(dyno.edge.connection, "connect", connect)
        assert run_dyno("processes") == 0
        out = capsys.readouterr().out
        assert ("HELD BY" in out) is column and ("alice@login1 (dyno pid 77)" in out) is column
        assert run_dyno("--json", "processes") == 0
        assert "held_by" in json.loads(capsys.readouterr().out)[0]


def test_help_teaches_both_modes(capsys):
    assert run_dyno("dynamic", "--help") == 0
    text = capsys.readouterr().out
    assert text.startswith("Usage: dyno dynamic [OPTIONS] [-- COMMAND ...]\n")
    assert "dyno dynamic --pid 4242 --output /data/prof\n" in text
    assert "dyno dynamic --output /data/prof -- python train.py --lr 3e-4\n" in text
    assert "--aicpu [on|off]" in text and "--pid N,N, --pids N,N" in text
    assert run_dyno("--help") == 0
    assert "\n  dynamic " in capsys.readouterr().out
