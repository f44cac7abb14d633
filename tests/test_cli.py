"""`dyno` as a user and as a script meet it: output forms and exit codes."""

from __future__ import annotations

import socket
import subprocess

from harness import BIN, Daemon


def dyno(*args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([str(BIN / "dyno"), *args], capture_output=True, text=True, timeout=60)


def closed_port() -> int:
    """A port the OS just handed out and nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_daemon_exits_3_and_says_where_and_what_to_check():
    port = closed_port()
    result = dyno("--port", str(port), "--timeout", "2", "status")
    assert result.returncode == 3
    assert f"cannot reach dynolog at localhost:{port}" in result.stderr
    assert f"dynolog --port {port}" in result.stderr
    assert result.stdout == ""


def test_usage_errors_exit_2():
    assert dyno("--port", "0", "status").returncode == 2
    result = dyno("no-such-command")
    assert result.returncode == 2 and "No such command 'no-such-command'" in result.stderr


def test_status_readable_and_json(daemon: Daemon):
    text = daemon.dyno("status", check=True).stdout
    assert text.startswith("dynolog ")
    assert f"ipc:        {daemon.socket_dir}/dynolog, " in text
    status = daemon.dyno_json("status")
    assert status["ipc_enabled"] is True
    assert status["ipc_addresses"] == [
        f"{daemon.socket_dir}/dynolog",  # Kineto's and the plugin's
        f"{daemon.socket_dir}/dynolog.sock",  # msMonitor's control socket
        f"{daemon.socket_dir}/dynolog_data.sock",  # msMonitor's metric data
    ]
    assert status["processes"] == 0
    assert status["tls"] is False


def test_version_names_both_sides(daemon: Daemon):
    version = daemon.dyno_json("version")
    assert version["daemon"]["api"] == "dynolog.v1"
    assert version["cli"] == version["daemon"]["version"]
    assert dyno("--version").stdout.startswith("dyno ")


def test_processes_when_none_registered_says_how_to_register(daemon: Daemon):
    assert daemon.dyno_json("processes") == []
    assert "MSMONITOR_USE_DAEMON=1" in daemon.dyno("processes", check=True).stdout


def test_help_teaches_each_command():
    for command in ("status", "version", "processes"):
        result = dyno(command, "--help")
        assert result.returncode == 0 and "Usage: dyno " + command in result.stdout
    assert "--hostname" in dyno("--help").stdout
