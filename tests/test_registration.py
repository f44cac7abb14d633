"""Processes register with a real daemon and leave it: plugin, stock Kineto, both, restarts, expiry."""

from __future__ import annotations

import json
import os
import signal
import time

import grpc
import pytest

from dynolog.core.registry import inner_pid
from dynoproto import dynolog_pb2 as pb
from dynoproto import dynolog_pb2_grpc as pb_grpc
from harness import Daemon, Workload, parent_of, read_line_until, wait_until
from test_service import Service

pytestmark = pytest.mark.torch


def test_a_training_process_registers_with_its_rank_and_job(daemon, start_workload):
    job = start_workload("train.py", daemon.plugin_env(RANK="3", LOCAL_RANK="1", MSMONITOR_JOB_ID="42"))
    process = wait_until(lambda: daemon.process(job.pid), what="the trainer to register")
    assert process["rank"] == 3
    assert process["local_rank"] == 1
    assert process["job_id"] == 42
    assert process["clients"] == ["CLIENT_KIND_PLUGIN"]
    assert process["ancestors"][0] > 1
    assert process["trace_state"] == "TRACE_STATE_IDLE"
    # The .pth hook counts optimizer steps without a code change; heartbeats carry the count.
    wait_until(
        lambda: (daemon.process(job.pid) or {}).get("current_step", 0) > 0, what="steps to be reported"
    )
    assert daemon.process(job.pid)["backend"] == "torch"

    table = daemon.dyno("processes", expect=0).stdout
    assert str(job.pid) in table and "plugin" in table and "torch" in table


def test_a_process_that_exits_leaves_at_once(daemon, start_workload):
    job = start_workload("train.py", daemon.plugin_env())
    wait_until(lambda: daemon.process(job.pid), what="registration")
    assert job.stop() == 0
    wait_until(lambda: daemon.process(job.pid) is None, timeout=5, what="the goodbye to remove it")


def test_the_goodbye_alone_removes_a_process(daemon, start_workload):
    """The process stays alive and the keep-alive is 60 s: only its goodbye can remove it."""
    job = start_workload("idle.py", daemon.plugin_env(), "--init", "--leave")
    wait_until(lambda: daemon.process(job.pid), what="registration")
    assert job.proc is not None and job.proc.stdin is not None
    job.proc.stdin.write("leave\n")
    job.proc.stdin.flush()
    read_line_until(job.proc, "left")
    wait_until(lambda: daemon.process(job.pid) is None, timeout=10, what="the goodbye to remove it")
    assert job.proc.poll() is None, "still running"


def test_a_stopped_process_is_forgotten_after_the_keepalive_and_not_before(start_daemon, start_workload):
    keepalive = 3.0  # the plugin heartbeats every second; the daemon sweeps every 0.75 s
    daemon = start_daemon("--process-keepalive-s", str(keepalive))
    job = start_workload("idle.py", daemon.plugin_env(), "--init")
    wait_until(lambda: daemon.process(job.pid), what="registration")
    assert job.proc is not None
    job.proc.send_signal(signal.SIGSTOP)  # alive in /proc, silent: only the keep-alive can expire it
    try:
        silent = []  # how long the daemon had not heard from it, each time it was still listed

        def forgotten() -> bool:
            process = daemon.process(job.pid)
            if process is not None:
                silent.append(process["last_seen_s"])
            return process is None

        wait_until(forgotten, timeout=15, what="expiry after the keep-alive")
        assert max(silent) >= keepalive - 1.0, f"forgotten after only {max(silent):.1f} s of silence"
        assert "forgot process" in daemon.log_file.read_text()
    finally:
        job.proc.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_process_is_forgotten_at_once(start_daemon, start_workload, sig):
    """No goodbye, and the sweep is 5 s away: the daemon's pidfd on the process tells it of the exit."""
    daemon = start_daemon("--process-keepalive-s", "60")
    job = start_workload("idle.py", daemon.plugin_env(), "--init")
    wait_until(lambda: daemon.process(job.pid), what="registration")
    assert job.proc is not None
    job.proc.send_signal(sig)
    job.proc.wait(10)
    exited = time.monotonic()
    wait_until(lambda: daemon.process(job.pid) is None, timeout=10, what="the exit to be noticed")
    took = time.monotonic() - exited
    assert f"process {job.pid} exited" in daemon.log_file.read_text(), "the sweep, not the pidfd, saw it"
    assert took < 1.0, f"forgotten {took:.2f} s after it exited"


def test_the_step_count_the_daemon_shows_is_current_within_half_a_second(daemon, start_workload):
    """The heartbeat comes every 5 s (the default keep-alive); the step count comes between them."""
    job = start_workload("train.py", daemon.plugin_env())
    daemon.wait_registered(job.pid)
    changes = []  # when the step the daemon shows changed, sampled every 50 ms for 3 s
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = pb_grpc.DynologStub(channel)
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            shown = [
                p.current_step for p in stub.ListProcesses(pb.ListProcessesRequest(), timeout=5).processes
            ]
            if not changes or shown[0] != changes[-1][1]:
                changes.append((time.monotonic(), shown[0]))
            time.sleep(0.05)  # the sampling period, not synchronisation
    gaps = [later[0] - earlier[0] for earlier, later in zip(changes, changes[1:])]
    assert len(gaps) >= 4 and max(gaps) < 0.8, f"the step changed after {gaps} s"


def test_the_service_switch_the_daemon_shows_follows_the_file_within_a_second(
    daemon, start_workload, tmp_path
):
    """The switch's state rides in the hello, every 5 s; a change sends one at once."""
    service = Service(
        tmp_path, lambda script, env, *args: start_workload(script, {**env, **daemon.plugin_env()}, *args)
    )
    job = service.start()
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = pb_grpc.DynologStub(channel)

        def shown() -> str:
            found = stub.ListProcesses(pb.ListProcessesRequest(), timeout=5).processes
            return next((p.service for p in found if p.pid == job.pid), "")

        wait_until(lambda: shown() == "off", what="registration")
        for enable, state in ((1, "on since"), (0, "off")):
            edited = time.monotonic()
            service.edit(enable=enable)
            wait_until(
                lambda state=state: shown().startswith(state),
                timeout=10,
                what=f"the switch to show {state!r}",
            )
            took = time.monotonic() - edited
            assert took < 1.5, f"{state!r} shown {took:.2f} s after the file said so"


def test_processes_reregister_after_a_daemon_restart(daemon, start_workload):
    job = start_workload("idle.py", daemon.plugin_env(RANK="5"), "--init")
    wait_until(lambda: daemon.process(job.pid), what="registration")
    daemon.restart()  # the new daemon knows nobody: the plugin's next heartbeat must register it again
    process = wait_until(lambda: daemon.process(job.pid), timeout=15, what="re-registration")
    assert process["rank"] == 5


def test_stock_pytorch_registers_as_a_kineto_client(daemon, start_workload):
    job = start_workload("train.py", daemon.kineto_env())
    process = wait_until(lambda: daemon.process(job.pid), what="Kineto's first poll")
    assert process["clients"] == ["CLIENT_KIND_KINETO"]
    assert process["backend"] == "kineto"
    status = daemon.dyno_json("status")
    assert status["kineto_processes"] == 1
    assert status["ipc"]["replied"] >= 1


def test_plugin_and_kineto_in_one_process_are_one_process(daemon, start_workload):
    env = {**daemon.kineto_env(), **daemon.plugin_env(RANK="0")}
    job = start_workload("train.py", env)
    both = ["CLIENT_KIND_PLUGIN", "CLIENT_KIND_KINETO"]
    wait_until(lambda: (daemon.process(job.pid) or {}).get("clients") == both, what="both clients")
    assert [p["pid"] for p in daemon.processes()] == [job.pid]


def test_explicit_init_without_torch(daemon, start_workload):
    job = start_workload("idle.py", {**daemon.client_env()}, "--init")
    process = wait_until(lambda: daemon.process(job.pid), what="registration")
    assert process["backend"] == "python"


def test_a_process_in_its_own_pid_namespace_is_targeted_by_either_pid(daemon, tmp_path):
    """As in a container: the process sees itself as pid 1; the daemon sees its host pid too."""
    job = Workload(
        "train.py", daemon.plugin_env(RANK="0"), launcher=["unshare", "--pid", "--fork", "--mount-proc"]
    )
    try:
        job.start()
        assert job.pid == 1
        process = wait_until(
            lambda: next((p for p in daemon.processes() if p["pid"] == 1 and p["backend"] == "torch"), None),
            what="the containerised process to register",
        )
        host_pid = process["host_pid"]
        assert host_pid != 1
        for pid in (1, host_pid):
            reply = daemon.dyno_json(
                "nputrace", "--iterations", "1", "--log-file", str(tmp_path), "--pids", str(pid), "--wait"
            )
            assert [p["host_pid"] for p in reply["processes"] if p["triggered"]] == [host_pid]
            outcome = reply["trace"]["processes"][0]
            assert outcome["phase"] == "TRACE_PHASE_FINISHED", outcome
        assert str(host_pid) in daemon.dyno("processes", expect=0).stdout  # both pids in the table
    finally:
        job.stop()


def test_the_inner_pid_is_the_kernels_word_not_the_claim():
    assert inner_pid(os.getpid(), claimed=12345) == os.getpid()  # NSpid's innermost entry
    assert inner_pid(2**30, claimed=7) == 7  # nothing in /proc: the claim stands


def test_the_daemon_and_dyno_never_register_themselves(tmp_path, start_workload):
    """msMonitor's README has users export MSMONITOR_USE_DAEMON=1 in the shell that starts both."""
    daemon = Daemon(tmp_path / "daemon")
    shell = {"MSMONITOR_USE_DAEMON": "1", **daemon.client_env()}  # the daemon could reach itself
    daemon.env = shell
    try:
        daemon.start()
        job = start_workload("idle.py", shell, "--init")
        wait_until(lambda: daemon.process(job.pid), what="the job to register")
        listed = daemon.dyno("--json", "processes", env=shell, expect=0)
        assert [p["pid"] for p in json.loads(listed.stdout)] == [job.pid], (
            "only the job: not dynolog, not dyno"
        )
    finally:
        daemon.cleanup()


def test_only_processes_that_run_a_framework_or_call_init_register(daemon, start_workload):
    """Every interpreter inherits MSMONITOR_USE_DAEMON: multiprocessing's resource tracker is no job."""
    job = start_workload("train.py", daemon.plugin_env(), "--resource-tracker")
    wait_until(lambda: daemon.process(job.pid), what="the training process to register")
    tracker = wait_until(lambda: _child_running(job.pid, "resource_tracker"), what="the resource tracker")
    plain = start_workload("idle.py", daemon.plugin_env())  # a Python tool that imports no framework
    explicit = start_workload("idle.py", daemon.plugin_env(), "--init")
    wait_until(lambda: daemon.process(explicit.pid), what="the explicit init to register")
    registered = {p["pid"] for p in daemon.processes()}
    assert registered == {job.pid, explicit.pid}, (registered, tracker, plain.pid)


def _child_running(parent: int, needle: str) -> int:
    """A child of *parent* whose command line contains *needle*, or 0."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = parent_of(int(entry))
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and needle.encode() in cmdline:
            return int(entry)
    return 0
