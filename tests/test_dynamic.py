"""``dyno dynamic`` end to end: the real dyno, daemon and PyTorch jobs; start/stop windows as PROF_ dirs."""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

from harness import BIN, Completed, Daemon, Workload, read_line_until, stop_process, trainer, wait_until
from msmonitor_contract import wire
from msmonitor_contract.vocabulary import TracePhase
from wire_peer import PluginPeer

pytestmark = pytest.mark.torch


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    # Plugins heartbeat every second: the step the daemon shows lags the job's by a few dozen.
    return start_daemon("--process-keepalive-s", "3")


def fast_trainer(daemon: Daemon, start_workload, rank: int = 0) -> Workload:
    """A registered PyTorch job stepping every 10 ms."""
    return trainer(daemon, start_workload, rank, args=("--step-ms", "10"))


def dyno_dynamic(daemon: Daemon, *args: str) -> List[str]:
    return daemon.dyno.command("--json", "dynamic", *args)


class Controller:
    """A `dyno --json dynamic` session kept open: commands on its stdin, one JSON answer per line."""

    def __init__(self, daemon: Daemon, *args: str, env: Dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            dyno_dynamic(daemon, *args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **(env or {})},
        )

    def answer(self, timeout: float = 60) -> Dict[str, Any]:
        return json.loads(read_line_until(self.proc, "{", timeout))  # type: ignore[no-any-return]

    def send(self, command: str) -> Dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> int:
        return stop_process(self.proc)


@pytest.fixture
def controllers():
    started: List[Controller] = []

    def start(*args: Any, **kwargs: Any) -> Controller:
        started.append(Controller(*args, **kwargs))
        return started[-1]

    yield start
    for controller in started:
        controller.close()


def scripted(daemon: Daemon, script: str, *args: str) -> Completed:
    return daemon.dyno("--json", "dynamic", *args, input=script, timeout=120)


def answers(result: Completed) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def window_of(answer: Dict[str, Any]) -> Dict[str, Any]:
    (process,) = answer["processes"]
    return process["window"]  # type: ignore[no-any-return]


def profiler_steps(directory: Path) -> List[int]:
    (trace,) = directory.glob("*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    return sorted(
        int(e["name"].split("#")[1]) for e in events if e.get("name", "").startswith("ProfilerStep#")
    )


def step_of(daemon: Daemon, pid: int) -> int:
    return int((daemon.process(pid) or {}).get("current_step", 0))


def test_three_windows_are_three_prof_directories_each_covering_exactly_its_steps(
    daemon, start_workload, controllers, tmp_path
):
    job = fast_trainer(daemon, start_workload)
    out = tmp_path / "prof"
    session = controllers(daemon, "--pid", str(job.pid), "--output", str(out), "--aicpu", "--task-time=l1")
    attached = session.answer()
    assert attached["ok"] and [p["pid"] for p in attached["processes"]] == [job.pid]
    directories = []
    for _ in range(3):
        started = session.send("start")
        window = window_of(started)
        assert window["phase"] == "TRACE_PHASE_RUNNING", started["message"]
        # msprof's options the CPU profiler cannot honour are named, as msprof spells them.
        assert "not honoured" in started["message"] and "--aicpu=on, --task-time=l1" in started["message"]
        first = window["start_step"]
        wait_until(lambda: step_of(daemon, job.pid) >= first + 3, what="three more steps")  # noqa: B023
        stopped = session.send("stop")
        window = window_of(stopped)
        assert window["phase"] == "TRACE_PHASE_FINISHED", stopped["message"]
        directory = Path(window["output"])
        assert directory.parent == out and directory.name in stopped["message"]
        first, stop = window["start_step"], window["stop_step"]
        assert stop - first >= 3
        assert profiler_steps(directory) == list(range(first, stop))
        info = json.loads((directory / "info.json").read_text())
        assert (info["pid"], info["rank"], info["first_step"], info["last_step"]) == (
            job.pid,
            0,
            first,
            stop - 1,
        )
        assert info["complete"] is True
        assert {"info.json", "summary.json", "summary.txt"} <= {f.name for f in directory.iterdir()}
        assert stopped["processes"][0]["size_bytes"] == sum(f.stat().st_size for f in directory.iterdir())
        directories.append(directory)
    sequence = [int(d.name.split("_")[1]) for d in directories]
    assert sequence == sorted(sequence) and len(set(sequence)) == 3
    assert session.send("stop")["message"] == "not started"

    quit = session.send("quit")
    assert quit["ended"] and session.proc.wait(30) == 0
    assert job.proc is not None and job.proc.poll() is None, "quit leaves the job running"

    # Attach again, scripted: the answers, one JSON object each, and a fourth directory.
    again = scripted(
        daemon, "start\nsleep 0.3\nstatus\nstop\nquit\n", "--pid", str(job.pid), "--output", str(out)
    )
    assert again.returncode == 0, again.stderr
    _attach, _start, status, stop_answer, _ = answers(again)
    assert "collecting for" in status["message"]
    assert window_of(stop_answer)["phase"] == "TRACE_PHASE_FINISHED"
    assert len(list(out.iterdir())) == 4


def test_a_second_controller_is_refused_with_the_holders_name_until_the_first_is_killed(
    daemon, start_workload, controllers, tmp_path
):
    job = fast_trainer(daemon, start_workload)
    first = controllers(daemon, "--pid", str(job.pid), "--output", str(tmp_path))
    assert first.answer()["ok"]
    holder = f"{getpass.getuser()} (uid {os.getuid()}, as its dyno says), dyno pid {first.proc.pid}"
    assert holder in (daemon.process(job.pid) or {})["held_by"]

    refused = scripted(daemon, "start\n", "--pid", str(job.pid), "--output", str(tmp_path))
    assert refused.returncode == 1
    (answer,) = answers(refused)
    assert answer["ended"] and not answer["ok"]
    assert f"held by {holder}" in answer["message"]
    assert answer["processes"][0]["detail"].startswith(f"held by {holder}")

    first.proc.send_signal(signal.SIGKILL)
    wait_until(lambda: not (daemon.process(job.pid) or {}).get("held_by"), timeout=15, what="the hold to end")
    assert scripted(daemon, "quit\n", "--pid", str(job.pid), "--output", str(tmp_path)).returncode == 0


def test_a_controller_that_stops_answering_loses_its_hold(daemon, start_workload, controllers, tmp_path):
    """As when its host vanishes: the connection stays open, but nothing answers the daemon's pings.
    (How soon, about 3 s by design, is measured in benchmarks/dynamic.py.)"""
    job = fast_trainer(daemon, start_workload)
    frozen = controllers(daemon, "--pid", str(job.pid), "--output", str(tmp_path))
    assert frozen.answer()["ok"]
    assert window_of(frozen.send("start"))["phase"] == "TRACE_PHASE_RUNNING"
    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: not (daemon.process(job.pid) or {}).get("held_by"), timeout=15, what="the hold to end"
        )
        # The window's folder is made as it is written, after the hold ends.
        written = wait_until(
            lambda: list(tmp_path.glob("PROF_*/info.json")), what="the window left collecting to be written"
        )
        assert len(written) == 1, written
    finally:
        frozen.proc.send_signal(signal.SIGCONT)


def test_msprofs_limits_end_the_session_saying_why(daemon, start_workload, controllers, tmp_path):
    job = fast_trainer(daemon, start_workload)
    idle = controllers(daemon, "--pid", str(job.pid), "--output", str(tmp_path), "--idle-timeout", "0.5")
    assert idle.answer()["ok"]
    news = idle.answer()  # nothing typed: the idle timeout speaks
    assert news["ended"] and "--idle-timeout" in news["message"]
    assert idle.proc.wait(30) == 1

    limited = scripted(
        daemon,
        "start\nstop\nstatus\n",
        "--pid",
        str(job.pid),
        "--output",
        str(tmp_path),
        "--command-limit",
        "2",
    )
    assert limited.returncode == 1
    _attach, _start, stop = answers(limited)  # status is never read: the session ended
    assert window_of(stop)["phase"] == "TRACE_PHASE_FINISHED"
    assert stop["ended"] and "--command-limit" in stop["message"] and stop["commands_left"] == 0


def test_the_job_exiting_mid_window_closes_it_with_what_was_written_marked_incomplete(
    daemon, start_workload, controllers, tmp_path
):
    job = fast_trainer(daemon, start_workload)
    session = controllers(daemon, "--pid", str(job.pid), "--output", str(tmp_path))
    session.answer()
    started = session.send("start")
    wait_until(lambda: step_of(daemon, job.pid) >= window_of(started)["start_step"] + 2, what="two steps")
    assert job.stop() == 0  # the job ends normally while collecting
    news = session.answer()
    assert news["seq"] == 0 and news["ended"], news
    assert f"pid {job.pid} (rank 0) exited" in news["message"] and "its window was closed" in news["message"]
    (directory,) = tmp_path.glob("PROF_*")
    info = json.loads((directory / "info.json").read_text())
    assert info["complete"] is False and any("incomplete" in w for w in info["warnings"])
    assert profiler_steps(directory), "what was recorded is kept"
    assert session.proc.wait(30) == 1


def test_launch_mode_starts_the_job_with_the_plugin_and_ends_with_its_exit_code(
    daemon, controllers, tmp_path
):
    log = tmp_path / "app.log"
    command = [str(BIN / "python"), str(Path(__file__).parent / "workloads" / "train.py")]
    session = controllers(
        daemon,
        "--output",
        str(tmp_path / "prof"),
        "--app-log",
        str(log),
        "--",
        *command,
        "--ignore-stdin",
        "--step-ms",
        "10",
        "--max-steps",
        "300",
        env=daemon.client_env(),
    )
    attached = session.answer()
    assert attached["ok"], attached["message"]
    (process,) = attached["processes"]
    started = session.send("start")
    assert window_of(started)["phase"] in ("TRACE_PHASE_READY", "TRACE_PHASE_RUNNING"), started["message"]
    assert window_of(session.send("stop"))["phase"] == "TRACE_PHASE_FINISHED"
    news = session.answer()  # the job ends after its 300 steps
    assert news["ended"] and f"pid {process['pid']}" in news["message"]
    assert session.proc.wait(30) == 0, "dyno exits with the job's exit code"
    output = log.read_text()
    assert "ready pid=" in output, "the job's output went to --app-log"
    assert "USDT" not in output, "Kineto's notes on each window would land in the prompt"
    assert len(list((tmp_path / "prof").glob("PROF_*"))) == 1


def test_sigterm_to_dyno_goes_on_to_the_launched_job_while_collecting(daemon, controllers, tmp_path):
    """msprof's dynamic mode: the application dyno launched gets the SIGTERM; dynolog reports its exit,
    and dyno exits with its status (128 + SIGTERM)."""
    command = [str(BIN / "python"), str(Path(__file__).parent / "workloads" / "train.py")]
    session = controllers(
        daemon,
        "--output",
        str(tmp_path / "prof"),
        "--app-log",
        str(tmp_path / "app.log"),
        "--",
        *command,
        "--ignore-stdin",
        "--step-ms",
        "10",
        env=daemon.client_env(),
    )
    (process,) = session.answer()["processes"]
    session.send("start")
    session.proc.send_signal(signal.SIGTERM)
    news = session.answer()
    assert news["ended"] and f"pid {process['pid']}" in news["message"] and "exited" in news["message"]
    assert session.proc.wait(30) == 128 + signal.SIGTERM, "dyno exits with the job's status"
    wait_until(lambda: daemon.process(process["pid"]) is None, what="the job's end, as the daemon sees it")


def test_several_pids_act_together_with_one_result_each(daemon, start_workload, tmp_path):
    jobs = [fast_trainer(daemon, start_workload, rank) for rank in (0, 1)]
    pids = ",".join(str(j.pid) for j in jobs)
    result = scripted(daemon, "start\nsleep 0.3\nstop\nquit\n", "--pid", pids, "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    attach, _start, stop, _ = answers(result)
    assert sorted(p["rank"] for p in attach["processes"]) == [0, 1]
    assert all(p["window"]["phase"] == "TRACE_PHASE_FINISHED" for p in stop["processes"])
    infos = [json.loads((Path(p["window"]["output"]) / "info.json").read_text()) for p in stop["processes"]]
    assert sorted(i["pid"] for i in infos) == sorted(j.pid for j in jobs)
    assert sorted(
        line.split(":")[0] for line in stop["message"].splitlines() if line.startswith("pid")
    ) == sorted(f"pid {j.pid} (rank {rank})" for rank, j in enumerate(jobs))


def test_a_container_pid_attaches(daemon, tmp_path):
    job = Workload(
        "train.py",
        daemon.plugin_env(RANK="0"),
        ("--step-ms", "10"),
        launcher=["unshare", "--pid", "--fork", "--mount-proc"],
    )
    try:
        job.start()
        assert job.pid == 1
        wait_until(
            lambda: any(p["pid"] == 1 and p["backend"] == "torch" for p in daemon.processes()),
            what="registration",
        )
        result = scripted(daemon, "start\nsleep 0.2\nstop\n", "--pid", "1", "--output", str(tmp_path))
        assert result.returncode == 0, result.stderr
        stop = answers(result)[2]
        (process,) = stop["processes"]
        assert process["pid"] == 1 and process["host_pid"] != 1
        assert "(host pid" in stop["message"]
        assert window_of(stop)["phase"] == "TRACE_PHASE_FINISHED"
    finally:
        job.stop()


def test_a_server_that_counts_no_steps_is_collected_at_once_and_msprofs_variable_activates_it(
    daemon, start_workload, tmp_path
):
    server = start_workload("serve.py", {**daemon.client_env(), "PROFILING_MODE": "dynamic"})
    daemon.wait_registered(server.pid)
    result = scripted(daemon, "start\nsleep 0.3\nstop\n", "--pid", str(server.pid), "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    _, start, stop, quit = answers(result)  # the end of the script quits
    assert quit["ended"]
    assert "started at once (it counts no steps)" in start["message"]
    directory = Path(window_of(stop)["output"])
    (trace,) = directory.glob("*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "aten::linear" for e in events), "the serving thread's work is recorded"
    info = json.loads((directory / "info.json").read_text())
    assert (info["first_step"], info["last_step"]) == (-1, -1)


def test_bad_input_is_refused_naming_it(daemon, start_workload, tmp_path):
    job = fast_trainer(daemon, start_workload)
    result = scripted(daemon, "", "--pid", str(job.pid), "--output", str(tmp_path), "--task-time", "l9")
    assert result.returncode == 2 and "--task-time" in result.stderr
    nobody = scripted(daemon, "", "--pid", "999999", "--output", str(tmp_path))
    assert nobody.returncode == 1 and "999999" in answers(nobody)[0]["message"]
    assert (daemon.process(job.pid) or {}).get("held_by") == "", "nothing held by a refused attach"


def test_a_scripted_session_in_text_reads_as_a_session(daemon, start_workload, tmp_path):
    job = fast_trainer(daemon, start_workload)
    result = daemon.dyno(
        "dynamic", "--pid", str(job.pid), "--output", str(tmp_path), input="status\nbogus\nquit\n"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert (
        out.index("(dyno) status") < out.index("0 of 100 start/stop commands used") < out.index("(dyno) quit")
    )
    assert "Commands:" in out, "an unknown word prints the usage"
    assert out.rstrip().endswith("quit: the job keeps running; attach again any time")


def test_a_lost_stop_is_pushed_again_at_the_next_heartbeat_until_the_window_ends(
    start_daemon, controllers, tmp_path
):
    """A stop lost in a full socket must not leave the window open for good: the daemon keeps it and
    pushes it again at each heartbeat until the process says the window ended."""
    daemon = start_daemon()
    peer = PluginPeer(daemon, capabilities=("push", "dynamic"))
    with contextlib.closing(peer.sock):
        peer.heartbeat()
        session = controllers(daemon, "--pid", str(os.getpid()), "--output", str(tmp_path))
        assert session.answer()["ok"]

        session.proc.stdin.write("start\n")  # type: ignore[union-attr]
        session.proc.stdin.flush()  # type: ignore[union-attr]
        start = peer.command()
        running = wire.TraceEvent(trace_id=start.trace_id, phase=TracePhase.RUNNING)
        peer.send(wire.EVENT, running.to_payload())
        assert window_of(session.answer())["phase"] == "TRACE_PHASE_RUNNING"

        session.proc.stdin.write("stop\n")  # type: ignore[union-attr]
        session.proc.stdin.flush()  # type: ignore[union-attr]
        lost = peer.command()  # dropped: as if the socket had been full
        assert (lost.trace_id, "DYNAMIC_ACTION=stop" in lost.config) == (start.trace_id, True), lost
        peer.heartbeat()
        again = peer.command()
        assert (again.trace_id, again.config) == (lost.trace_id, lost.config)
        peer.heartbeat()  # still unanswered: pushed again at every heartbeat
        assert peer.command().config == lost.config
        finished = wire.TraceEvent(trace_id=start.trace_id, phase=TracePhase.FINISHED, output=str(tmp_path))
        peer.send(wire.EVENT, finished.to_payload())
        assert window_of(session.answer())["phase"] == "TRACE_PHASE_FINISHED"
        peer.heartbeat()
        assert peer.nothing_queued(), "answered: nothing more to push"
