"""The daemon as an operator meets it: flags, start-up errors, the abstract name, signals, health."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
from pathlib import Path
from typing import Callable

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from dynolog.config import parse_args
from dynolog.incidents.watch import STORE_NAME, default_trace_dir
from harness import (
    BIN,
    KINETO_1S_CONFIG,
    REPO,
    Daemon,
    Workload,
    nsenter,
    read_line_until,
    stop_process,
    wait_until,
)


def test_both_flag_spellings_and_gflags_booleans():
    dashed = parse_args(["--enable-ipc-monitor", "--process-keepalive-s", "5", "--ipc-socket-dir", "/s"])
    underscored = parse_args(["--enable_ipc_monitor=true", "--process_keepalive_s=5", "--ipc_socket_dir=/s"])
    assert dashed.enable_ipc_monitor and underscored.enable_ipc_monitor
    assert dashed.process_keepalive_s == underscored.process_keepalive_s == 5
    assert parse_args(["--noenable_ipc_monitor"]).enable_ipc_monitor is False


def test_flagfile_as_the_systemd_unit_uses_it(tmp_path: Path):
    flagfile = tmp_path / "dynolog.gflags"
    flagfile.write_text("# node defaults\n--enable_ipc_monitor\n\n--port=1999\n--enable_perf_monitor\n")
    config = parse_args([f"--flagfile={flagfile}", "--log-level", "debug"])
    assert (config.enable_ipc_monitor, config.port, config.log_level) == (True, 1999, "DEBUG")
    assert config.ignored_flags == ["enable_perf_monitor"]


def test_the_shipped_flagfile_parses():
    config = parse_args([f"--flagfile={REPO / 'deploy' / 'dynolog.gflags'}"])
    assert (config.enable_ipc_monitor, config.port, config.ignored_flags) == (True, 1778, [])


@pytest.mark.parametrize(
    ("log_file", "euid", "environ", "traces"),
    [
        ("/var/log/dynolog.log", 0, {}, "/var/lib/dynolog/traces"),  # root's default log
        (
            "/var/log/dynolog/dynolog.log",
            0,
            {"STATE_DIRECTORY": "/var/lib/dynolog"},
            "/var/lib/dynolog/traces",
        ),
        ("/var/log/dynolog/dynolog.log", 1000, {"STATE_DIRECTORY": "/srv/dyn:/srv/other"}, "/srv/dyn/traces"),
        ("/var/log/dynolog.log", 1000, {"XDG_STATE_HOME": "/home/u/.state"}, "/home/u/.state/dynolog/traces"),
        ("/home/u/.local/state/dynolog/dynolog.log", 1000, {}, "/home/u/.local/state/dynolog/traces"),
        ("/tmp/run/dynolog.log", 0, {"STATE_DIRECTORY": "/var/lib/dynolog"}, "/tmp/run/traces"),
        ("/var/logs/dynolog.log", 0, {}, "/var/logs/traces"),  # not /var/log
    ],
)
def test_auto_traces_go_to_a_state_folder_not_among_the_logs(log_file, euid, environ, traces):
    assert default_trace_dir(Path(log_file), euid, environ) == Path(traces)


def run_dynolog(*args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([str(BIN / "dynolog"), *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "must be a TCP port in 0..65535 (0: any free port), got 70000"),
        (["--process-keepalive-s", "0"], "must be > 0, got 0"),
        (["--enable-ipc-monitor=maybe"], "expected true or false, got 'maybe'"),
        (["--flagfile", "/nonexistent/flags"], "cannot read --flagfile /nonexistent/flags"),
        (["--listen-address", "0.0.0.0"], "refusing to serve plaintext gRPC on 0.0.0.0 without certificates"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_bad_flags_are_refused_with_a_message_naming_them(tmp_path: Path, args, message):
    result = run_dynolog("--port", "0", "--log-file", str(tmp_path / "d.log"), *args)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize("legacy_rpc", ["on", "off"])
def test_a_port_in_use_is_said_in_one_line_without_grpcs_log(tmp_path: Path, legacy_rpc: str):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run_dynolog(
            "--port", str(port), f"--legacy-rpc={legacy_rpc}", "--log-file", str(tmp_path / "d.log")
        )
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()  # nothing from gRPC's C core ("E1201 12:00:00.0 ... add_port.cc")
    assert line.startswith(f"dynolog: cannot listen on 127.0.0.1:{port}: ") and "in use" in line, line


def test_version_flag():
    result = run_dynolog("--version")
    assert result.returncode == 0 and result.stdout.startswith("dynolog ")


def test_missing_socket_dir_is_named(tmp_path: Path):
    result = run_dynolog(
        "--enable-ipc-monitor",
        "--port",
        "0",
        "--log-file",
        str(tmp_path / "d.log"),
        "--ipc-socket-dir",
        str(tmp_path / "missing"),
    )
    assert result.returncode == 1
    assert (
        f"cannot bind IPC socket {tmp_path / 'missing'}/dynolog: No such file or directory" in result.stderr
    )


def test_a_second_daemon_on_the_same_socket_dir_fails_fast(daemon: Daemon, tmp_path: Path):
    result = run_dynolog(
        "--enable-ipc-monitor",
        "--port",
        "0",
        "--log-file",
        str(tmp_path / "2.log"),
        "--ipc-socket-dir",
        str(daemon.socket_dir),
    )
    assert result.returncode == 1
    assert f"another daemon is already serving IPC at {daemon.socket_dir}/dynolog" in result.stderr
    assert daemon.dyno("status").returncode == 0, "the first daemon is untouched"


def test_sigterm_stops_cleanly_and_removes_the_socket(daemon: Daemon):
    socket_path = daemon.socket_dir / "dynolog"
    assert socket_path.is_socket()
    assert oct(socket_path.stat().st_mode & 0o777) == "0o600"
    assert daemon.stop() == 0
    assert not socket_path.exists()
    assert "dynolog stopped" in daemon.log_file.read_text()


def test_a_stale_socket_file_from_a_killed_daemon_is_replaced(daemon: Daemon):
    assert daemon.proc is not None
    stop_process(daemon.proc, signal.SIGKILL)
    assert (daemon.socket_dir / "dynolog").exists()
    daemon.start()
    assert daemon.dyno("status").returncode == 0


def test_health_and_reflection_are_served(daemon: Daemon):
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = health.Check(health_pb2.HealthCheckRequest(service="dynolog.v1.Dynolog"), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        names = {
            s.name
            for r in reflection.ServerReflectionInfo(iter([request]), timeout=5)
            for s in r.list_services_response.service
        }
    assert {"dynolog.v1.Dynolog", "grpc.health.v1.Health"} <= names


@pytest.mark.torch
def test_abstract_name_serves_stock_kineto_and_refuses_a_second_daemon(netns_holder, tmp_path: Path):
    daemon = Daemon(tmp_path / "d", ["--ipc-socket-dir="], netns_of=netns_holder)
    env = {"KINETO_USE_DAEMON": "1", "KINETO_CONFIG": str(KINETO_1S_CONFIG), "MSMONITOR_USE_DAEMON": "1"}
    job = Workload("train.py", env, netns_of=netns_holder)
    try:
        daemon.start()
        assert "ipc=@dynolog@" in daemon.ready_line
        second = subprocess.run(
            nsenter(
                netns_holder,
                [
                    str(BIN / "dynolog"),
                    "--enable-ipc-monitor",
                    "--port",
                    "0",
                    "--log-file",
                    str(tmp_path / "2.log"),
                ],
            ),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 1
        assert "another daemon is already bound to IPC address @dynolog@" in second.stderr
        job.start()
        both = ["CLIENT_KIND_PLUGIN", "CLIENT_KIND_KINETO"]
        wait_until(lambda: (daemon.process(job.pid) or {}).get("clients") == both, what="both clients")
    finally:
        job.stop()
        daemon.cleanup()


def test_a_failed_start_leaves_no_socket_behind(daemon: Daemon, tmp_path: Path):
    """The gRPC port is taken (by the first daemon): the second one exits, its IPC sockets removed."""
    sockets = tmp_path / "second"
    sockets.mkdir()
    result = subprocess.run(
        [
            str(BIN / "dynolog"),
            "--enable-ipc-monitor",
            "--port",
            str(daemon.port),
            "--log-file",
            str(tmp_path / "2.log"),
            "--ipc-socket-dir",
            str(sockets),
            "--msmonitor-socket-dir",
            str(sockets),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{daemon.port}" in result.stderr
    assert list(sockets.iterdir()) == []


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (
            "--log-file",
            "dynolog: cannot write the log file {file}/dynolog.log: {file} is a file, not a folder",
        ),
        ("--metric-log-dir", "dynolog: cannot open a metric sink: {file} is a file, not a folder"),
    ],
)
def test_a_folder_it_cannot_write_stops_the_start_saying_why(tmp_path: Path, flag: str, message: str):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    value = in_the_way / ("dynolog.log" if flag == "--log-file" else "tb")
    daemon = Daemon(tmp_path / "daemon", [flag, str(value)])  # after the harness's own --log-file: wins
    result = subprocess.run(daemon.command(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert message.format(file=in_the_way) in result.stderr, result.stderr


@pytest.mark.parametrize("flags", [["--logtostderr"], []])
def test_logtostderr_puts_the_log_on_stderr_as_well_as_in_the_file(tmp_path: Path, flags):
    """For a container's log (kubectl logs) and journald; without it and without a terminal, the file only.
    Stopped the moment it is ready, the daemon still stops cleanly (exit 0)."""
    daemon = Daemon(tmp_path, flags)
    with open(tmp_path / "stderr", "w") as stderr:
        proc = subprocess.Popen(daemon.command(), stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        read_line_until(proc, "dynolog ready")
    finally:
        assert stop_process(proc) == 0
        daemon.cleanup()
    assert "serving gRPC" in daemon.log_file.read_text()
    logged = (tmp_path / "stderr").read_text()
    assert ("serving gRPC" in logged and "dynolog stopped" in logged) == bool(flags), logged


@pytest.mark.parametrize("damage", ["random bytes", "a folder"])
def test_a_corrupt_incidents_store_is_moved_aside_and_the_daemon_starts(
    start_daemon: Callable[..., Daemon], tmp_path: Path, damage: str
):
    """Incidents are a record: losing them must not keep the daemon from serving (even without
    --auto-trace, the store is opened at start). The damaged one is kept beside, for a post-mortem."""
    workdir = tmp_path / "daemon"
    workdir.mkdir()
    store = workdir / STORE_NAME
    if damage == "a folder":
        store.mkdir()
    else:
        store.write_bytes(random.Random(23).randbytes(8192))
    daemon = start_daemon(workdir=workdir)
    assert daemon.dyno_json("incidents") == [], "a new, empty store"
    (aside,) = workdir.glob(f"{STORE_NAME}.corrupt-*")
    assert aside.is_dir() == (damage == "a folder")
    assert f"incidents store {store} unreadable" in daemon.log_file.read_text()
