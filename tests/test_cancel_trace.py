"""``dyno trace ID --cancel`` against a real daemon and real plugin processes: a trace waiting for a
step that never comes no longer locks its process out, and a command still waiting for a client that
polls is taken back. (A read-only client cannot cancel: tests/security/test_security_authz.py.)"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any, Callable, Dict

import pytest

import legacy_cli as cli
from harness import Daemon, Workload, trainer, wait_until
from msmonitor_contract import wire


def phase(daemon: Daemon, trace_id: str) -> Dict[str, Any]:
    process: Dict[str, Any] = daemon.dyno_json("trace", trace_id)["processes"][0]
    return process


def pending_trace(daemon: Daemon, tmp_path: Path) -> str:
    """An nputrace for a step the process never reaches (it counts none), accepted by its plugin."""
    started = daemon.dyno_json(
        "nputrace", "--start-step", "500", "--iterations", "1", "--log-file", str(tmp_path)
    )
    assert started["commandStatus"] == "effective", started
    trace_id: str = started["trace_id"]
    wait_until(lambda: phase(daemon, trace_id)["phase"] == "TRACE_PHASE_READY", what="the plugin to accept")
    return trace_id


def test_a_cancelled_pending_trace_frees_its_process_on_either_wire(
    daemon: Daemon, start_workload: Callable[..., Workload], tmp_path: Path
) -> None:
    job = start_workload("idle.py", daemon.plugin_env(), "--init")
    wait_until(lambda: daemon.process(job.pid), what="registration")
    trace_id = pending_trace(daemon, tmp_path)
    busy = daemon.dyno_json("nputrace", "--iterations", "1", "--log-file", str(tmp_path))
    assert busy["reason"] == "REASON_TRACE_BUSY", busy

    cancelled = daemon.dyno("trace", trace_id, "--cancel")
    assert cancelled.returncode == 0, cancelled.stderr
    process = phase(daemon, trace_id)
    assert process["phase"] == "TRACE_PHASE_FAILED"
    assert process["error"] == "cancelled before it began (it waited for step 500; the process is at step 0)"

    second = pending_trace(daemon, tmp_path)
    reply = json.loads(cli.send(daemon.port, cli.cancel_trace(second)) or b"{}")
    assert reply == {
        "traceId": second,
        "done": True,
        "processes": [
            {
                "pid": job.pid,
                "phase": "failed",
                "error": "cancelled before it began (it waited for step 500; the process is at step 0)",
            }
        ],
    }

    again = daemon.dyno_json(
        "nputrace", "--start-step", "500", "--iterations", "1", "--log-file", str(tmp_path)
    )
    assert again["commandStatus"] == "effective", again


def test_a_command_waiting_in_an_outbox_is_taken_back(daemon: Daemon, tmp_path: Path) -> None:
    """This test polls as stock Kineto does: cancelled before its next poll, the command never comes."""
    kineto = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    kineto.bind(str(tmp_path / "kineto"))
    kineto.settimeout(10)

    def poll() -> bytes:
        request = wire.KinetoRequest(3, 0, (os.getpid(),)).pack()
        kineto.sendto(wire.encode(wire.REQ, request), str(daemon.socket_dir / wire.DAEMON_ENDPOINT))
        return kineto.recv(wire.MAX_DATAGRAM)

    try:
        poll()  # registers
        started = daemon.dyno_json("gputrace", "--duration-ms", "500", "--log-file", str(tmp_path / "t.json"))
        assert started["commandStatus"] == "effective", started
        assert daemon.dyno("trace", started["trace_id"], "--cancel").returncode == 0
        process = phase(daemon, started["trace_id"])
        assert (process["phase"], process["error"]) == (
            "TRACE_PHASE_FAILED",
            "cancelled before the process's client took it",
        )
        assert b"ACTIVITIES_LOG_FILE" not in poll()
    finally:
        kineto.close()


@pytest.mark.torch
def test_a_cancelled_recording_trace_stops_at_its_next_step_and_keeps_its_files(
    daemon: Daemon, start_workload: Callable[..., Workload], tmp_path: Path
) -> None:
    trainer(daemon, start_workload)
    started = daemon.dyno_json("nputrace", "--iterations", "1000", "--log-file", str(tmp_path))
    trace_id = started["trace_id"]
    wait_until(lambda: phase(daemon, trace_id)["phase"] == "TRACE_PHASE_RUNNING", what="recording")
    assert daemon.dyno("trace", trace_id, "--cancel", "--wait", "--wait-timeout", "120").returncode == 0
    process = phase(daemon, trace_id)
    assert process["phase"] == "TRACE_PHASE_FINISHED", process
    assert process["stop_step"] - process["start_step"] < 1000
    assert process["files"]
