"""What `dyno` puts on a terminal, against a real daemon: text others chose (a process's hostname,
backend and versions, a `dyno dynamic` controller's user name) never reaches it with its control
characters raw, and a reader that leaves early (`dyno … | head`) ends dyno without a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from harness import Daemon, stop_process, wait_until
from msmonitor_contract import wire
from test_ipc_hostile import Client

# Retitles the terminal window, then moves the cursor up and erases the line: a process (or a controller)
# could make a table lie about itself.
EVIL = "\x1b]0;pwned\x07\x1b[1A\x1b[2Kroot"


def hostile_process(daemon: Daemon) -> Client:
    """This test's process, registered as a plugin whose every self-described field is EVIL."""
    hello = wire.Hello(
        pid=os.getpid(),
        hostname=EVIL,
        backend=EVIL,
        versions={"torch": EVIL},
        capabilities=["push", "dynamic"],
    )
    client = Client(daemon, "evil")
    client.send(wire.encode(wire.HELLO, hello.to_payload()))
    assert wire.decode(client.sock.recv(wire.MAX_DATAGRAM)).type == wire.ACK
    return client


def test_what_processes_say_of_themselves_is_shown_escaped(daemon: Daemon):
    client = hostile_process(daemon)
    try:
        result = daemon.dyno("processes", expect=0)
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
        assert "\\x1b]0;pwned\\x07" in result.stdout, result.stdout
        assert daemon.process(os.getpid())["hostname"] == EVIL, (
            "--json carries the text itself, escaped by JSON"
        )
    finally:
        client.close()


def test_a_controllers_name_is_shown_escaped_by_processes_and_dynamic(daemon: Daemon, tmp_path: Path):
    client = hostile_process(daemon)
    command = daemon.dyno.command("dynamic", "--pid", str(os.getpid()))
    controller = subprocess.Popen(
        [*command, "--output", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "USER": EVIL, "LOGNAME": EVIL},
    )
    try:
        wait_until(lambda: (daemon.process(os.getpid()) or {}).get("held_by"), what="the session to hold it")
        shown = daemon.dyno("processes", expect=0).stdout
        refused = subprocess.run(
            [*command, "--output", str(tmp_path)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode == 1
        for text in (shown, refused.stdout + refused.stderr):
            assert "\x1b" not in text and "\\x1b]0;pwned" in text, text
    finally:
        assert controller.stdin is not None
        controller.stdin.close()
        stop_process(controller)
        client.close()


@pytest.mark.parametrize("args", [["processes"], ["status"], ["--version"]])
def test_a_reader_that_leaves_early_ends_dyno_quietly(daemon: Daemon, args):
    """stdout a pipe whose reader is gone, as `dyno … | head` after head read its lines."""
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            daemon.dyno.command(*args),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert result.stderr == "" and result.returncode == 128 + signal.SIGPIPE, result.stderr
