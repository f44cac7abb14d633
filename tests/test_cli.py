"""`dyno` as a user and as a script meet it: output forms and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

from harness import Daemon, dyno, free_port


def test_unreachable_daemon_exits_3_and_says_where_and_what_to_check():
    port = free_port()
    result = dyno("--port", str(port), "--timeout", "2", "status")
    assert result.returncode == 3
    assert f"cannot reach dynolog at localhost:{port}" in result.stderr
    assert f"dynolog --port {port}" in result.stderr
    assert result.stdout == ""


def test_usage_errors_exit_2():
    assert dyno("--port", "0", "status").returncode == 2
    result = dyno("no-such-command")
    assert result.returncode == 2 and "No such command 'no-such-command'" in result.stderr
    result = dyno("nputrace", "--log-file", "/tmp", "--data-simplification", "maybe")
    assert result.returncode == 2
    assert result.stderr.startswith("dyno: --data-simplification: must be true or false")


def test_a_mistyped_flag_exits_2_suggesting_the_flags_it_is_near():
    result = dyno("nputrace", "--log-fil", "/x")
    assert result.returncode == 2 and result.stdout == ""
    assert "No such option: --log-fil (Possible options: --hostfile, --log-file)" in result.stderr


def test_no_command_shows_the_help_and_exits_2():
    for args in ((), ("certs",)):
        result = dyno(*args)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.startswith("dyno: missing command\n\nUsage: dyno ")


def test_bash_completion_from_its_script_offers_commands_and_a_commands_flags(tmp_path):
    """The script `--show-completion bash` prints, sourced into a real bash, completes as a user sees it."""
    script = tmp_path / "dyno.bash"
    script.write_text(dyno("--show-completion", "bash", expect=0).stdout)
    dyno_dir = str(Path(sys.executable).parent)  # the script calls dyno by name, from PATH

    def complete(*words: str) -> List[str]:
        line = " ".join(f"'{w}'" for w in ("dyno", *words))
        probe = f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words)}; _dyno_completion dyno; "
        probe += 'printf "%s\\n" "${COMPREPLY[@]}"'
        done = subprocess.run(
            ["bash", "-c", probe],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PATH": f"{dyno_dir}:{os.environ['PATH']}"},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("npu") == ["nputrace", "npu-monitor"]
    assert complete("nputrace", "--mstx-domain-i") == ["--mstx-domain-include"]
    assert "init" in complete("certs", "")


def test_status_readable_and_json(daemon: Daemon):
    text = daemon.dyno("status", expect=0).stdout
    assert text.startswith("dynolog ")
    assert f"ipc:        {daemon.socket_dir}/dynolog, " in text
    assert "  dropped:    nothing\n" in text
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
    assert "MSMONITOR_USE_DAEMON=1" in daemon.dyno("processes", expect=0).stdout


COMMANDS = (
    *("status", "version", "processes", "nputrace", "gputrace", "trace", "npu-monitor", "certs"),
    *("certs init", "certs issue", "certs check", "certs revoke", "certs crl"),
)


def test_help_teaches_each_command():
    listings = dyno("--help").stdout + dyno("certs", "--help").stdout
    assert "--hostname" in listings
    for command in COMMANDS:
        assert f"\n  {command.split()[-1]} " in listings
        result = dyno(*command.split(), "--help")
        assert result.returncode == 0 and result.stdout.startswith("Usage: dyno " + command)
    nputrace = " ".join(dyno("nputrace", "--help").stdout.split())
    assert "Example: dyno nputrace --start-step 120" in nputrace
    assert "--duration-ms INT length of a time-based trace [default: 500]" in nputrace
    assert "--with-stacks, --with-stack" in dyno("gputrace", "--help").stdout
    assert dyno("incidents", "--help").stdout.startswith("Usage: dyno incidents [OPTIONS] [show ID]\n")


def test_gputrace_takes_dynolog_spellings_and_fails_on_no_process_only_when_asked(daemon: Daemon, tmp_path):
    args = ("gputrace", "--log-file", str(tmp_path / "t.json"), "--with-stack")
    result = daemon.dyno(*args, "--fail-on-no-process")
    assert result.returncode == 1 and "no process is registered with this daemon" in result.stdout
    assert result.stderr == "dyno: no process took the command\n"
    lenient = daemon.dyno(*args)  # dynolog's default: the answer says so, the exit status does not
    assert lenient.returncode == 0 and "no process is registered with this daemon" in lenient.stdout


def loaded(packages: str, *args: str) -> List[str]:
    """Which of the comma-separated *packages* (top-level ones, or modules by full name) `dyno ARGS`
    imported."""
    probe = (
        "import sys\nfrom dyno.main import main\n"
        "try:\n    main(sys.argv[2:])\nexcept SystemExit:\n    pass\n"
        "packages = set(sys.argv[1].split(','))\n"
        "names = {n for m in sys.modules for n in (m, m.split('.')[0])}\n"
        "print(*sorted(names & packages), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, packages, *args], capture_output=True, text=True, timeout=60
    )
    return result.stderr.splitlines()[-1].split()


@pytest.mark.parametrize(
    "args",
    [("--help",), ("version", "--help"), ("nputrace",), ("no-such-command",), ("--port", "0", "status")],
)
def test_help_and_usage_errors_start_without_grpc(args):
    """They must answer at once: gRPC, protobuf and cryptography take several times Python's start."""
    assert loaded("grpc,google,cryptography", *args) == []


COMMAND_MODULES = ",".join(
    f"dyno.commands.{name}"
    for name in (
        *("status", "version", "processes", "nputrace", "gputrace", "trace", "dynamic", "npu_monitor"),
        *("incidents", "service", "certs", "respond"),
    )
)


@pytest.mark.parametrize("args", [("--help",), (), ("no-such-command",), ("--port", "0", "status")])
def test_help_and_usage_errors_import_no_command_module(args):
    """`dyno --help` lists the commands from dyno.commands' registry: their modules stay unread."""
    assert loaded(COMMAND_MODULES, *args) == []


def test_a_command_imports_its_own_module_only():
    assert loaded(COMMAND_MODULES, "npu-monitor", "--help") == ["dyno.commands.npu_monitor"]
    assert loaded(COMMAND_MODULES, "nputrace") == ["dyno.commands.nputrace"]  # a usage error


def test_each_listed_summary_is_the_first_line_of_its_commands_help():
    from dyno.commands import COMMANDS
    from dyno.flags import Listed

    listed = [entry for entry in COMMANDS if isinstance(entry, Listed)]
    assert listed
    for entry in listed:
        command = entry.load()
        assert (command.name, command.help.splitlines()[0]) == (entry.name, entry.help)


def test_each_flag_is_named_as_validation_errors_name_its_field():
    """The checks' messages name the flag a user typed: each CLI flag is its field's in a kind's
    declaration (msmonitor_contract.kinds), by which a check's error names it."""
    from dyno.commands import COMMANDS
    from dyno.declared import TARGETING
    from dyno.flags import Listed
    from msmonitor_contract.kinds import KINDS

    commands = [entry.load() for entry in COMMANDS if isinstance(entry, Listed)]
    flags = [*TARGETING, *(flag for command in commands for flag in command.flags)]
    named = [flag for flag in flags if flag.field and not flag.positional]
    assert any(flag.field == "targets.ranks" for flag in named)
    for flag in named:
        assert {kind.flag(flag.field) for kind in KINDS} & {flag.name, *flag.aliases}, flag


def test_status_without_certs_loads_no_cryptography(daemon: Daemon):
    assert loaded("grpc,cryptography", "--port", str(daemon.port), "status") == ["grpc"]


def test_status_of_this_projects_daemon_loads_no_legacy_stack(daemon: Daemon):
    """The C++ daemons' wire is loaded only when the peer turns out to be one."""
    legacy = "dyno.edge.legacy_commands,msmonitor_contract.kinds"
    assert loaded(legacy, "--port", str(daemon.port), "status") == []


def test_global_options_may_follow_the_command_and_then_win(daemon: Daemon):
    port = free_port()
    after = dyno("--port", str(port), "processes", "--port", str(daemon.port), "--json")
    assert after.returncode == 0, after.stderr
    assert after.stdout.lstrip().startswith("["), "--json after the command took effect"
    unreachable = dyno("processes", "--port", str(port))
    assert unreachable.returncode == 3 and f"localhost:{port}" in unreachable.stderr


def test_processes_wait_for_on_a_daemon_without_ipc_says_so_at_once(start_daemon):
    """No process can register with a daemon started without --enable-ipc-monitor: not a minute's wait."""
    daemon = start_daemon("--enable-ipc-monitor=false")  # after the harness's own flag: wins
    assert daemon.dyno_json("status")["ipc_enabled"] is False
    started = time.monotonic()
    result = daemon.dyno("processes", "--wait-for", "1")
    assert time.monotonic() - started < 20  # the wait's bound is 60 s
    assert result.returncode == 1 and result.stdout == ""
    assert "has IPC off, so no process can register: start it with --enable-ipc-monitor" in result.stderr
    assert daemon.dyno("processes").returncode == 0  # without --wait-for: the empty listing, as before
