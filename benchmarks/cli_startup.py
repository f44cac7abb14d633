"""How fast ``dyno`` starts: ``dyno --help`` against a bare typer app's, ``dyno status`` against
importing what it must (gRPC and typer).

* Five commands, timed as a user runs them (fork/exec, interpreter start, imports, work, exit), in
  rounds: each round runs each command once, one after the other, so load on the machine falls on all
  alike. Figures are medians over the rounds.
* ``dyno --port P status`` asks a real daemon started here on a free port with private sockets.
* The goals hold each command to its floor: ``dyno --help`` ≤ 1.3 times the ``--help`` of a typer app
  with as many commands that do nothing (written here, run by the same Python); ``dyno status`` ≤ 1.3
  times ``python -c "import grpc, typer"``. ``python -c pass`` is shown for scale.
* Bytecode: the timed processes keep compiled modules in a private cache (``PYTHONPYCACHEPREFIX``),
  filled by warm-up rounds, as an installed dyno has them; with ``PYTHONDONTWRITEBYTECODE``, which some
  sandboxes set, every run would compile dyno from source and time that instead.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

from _bench import Figure, clean_env, report, running_daemon, summarize_ns

PYTHON = sys.executable
DYNO = str(Path(sys.executable).parent / "dyno")
HELP_GOAL = 1.3  # times a bare typer app's --help
STATUS_GOAL = 1.3  # times python -c "import grpc, typer"
BARE = "bare typer app --help"
FLOOR = 'python -c "import grpc, typer"'
# The floor with the generated messages, which any client of the service loads: reported beside it.
WITH_STUBS = 'python -c "import grpc, typer, dynoproto"'
# A typer app of dyno's size whose commands do nothing: what any typer CLI pays for its --help.
BARE_APP = """\
import typer

app = typer.Typer(add_completion=False, rich_markup_mode=None)
for i in range({commands}):
    def command(value: int = 0) -> None:
        \"\"\"A command that does nothing.\"\"\"
    app.command(f"command{{i}}")(command)
app()
"""


def bare_app(folder: str) -> str:
    from dyno.commands import COMMANDS

    path = Path(folder) / "bare_typer_app.py"
    path.write_text(BARE_APP.format(commands=len(COMMANDS)))
    return str(path)


def commands(port: int, bare: str) -> Dict[str, List[str]]:
    return {
        "python -c pass": [PYTHON, "-c", "pass"],
        BARE: [PYTHON, bare, "--help"],
        "dyno --help": [DYNO, "--help"],
        FLOOR: [PYTHON, "-c", "import grpc, typer"],
        WITH_STUBS: [PYTHON, "-c", "import grpc, typer, dynoproto"],
        "dyno status": [DYNO, "--port", str(port), "status"],
    }


def time_rounds(
    cmds: Dict[str, List[str]], env: Dict[str, str], rounds: int, budget_s: float
) -> Dict[str, List[int]]:
    """Wall time of each command in nanoseconds, the commands interleaved round after round."""
    samples: Dict[str, List[int]] = {name: [] for name in cmds}
    deadline = time.monotonic() + budget_s
    for _ in range(rounds):
        for name, cmd in cmds.items():
            t0 = time.perf_counter_ns()
            # Pipes, not DEVNULL: with a timeout and no pipe to read, subprocess polls for the exit
            # with a growing sleep, which rounds every figure up to its next poll.
            subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=30)
            samples[name].append(time.perf_counter_ns() - t0)
        if time.monotonic() > deadline:
            break
    return samples


def median_ms(values: Sequence[int]) -> float:
    return statistics.median(values) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed rounds (each runs every command once)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds that fill the bytecode cache")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="msmonitor-pyc-") as pyc, running_daemon() as daemon:
        env = clean_env(PYTHONPYCACHEPREFIX=pyc)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cmds = commands(daemon.port, bare_app(pyc))
        time_rounds(cmds, env, args.warmup, 60.0)
        samples = time_rounds(cmds, env, args.runs, 120.0)

    ms = {name: median_ms(values) for name, values in samples.items()}
    help_ratio = ms["dyno --help"] / ms[BARE]
    status_ratio = ms["dyno status"] / ms[FLOOR]
    figures = [
        *(Figure(f"{name}: median", value, "ms", "", "—") for name, value in ms.items()),
        Figure(f"dyno --help / {BARE}", help_ratio, "x", f"<= {HELP_GOAL}", "— (Rust CLI)"),
        Figure(f"dyno status / {FLOOR}", status_ratio, "x", f"<= {STATUS_GOAL}", "— (Rust CLI)"),
        Figure(f"dyno status / {WITH_STUBS}", ms["dyno status"] / ms[WITH_STUBS], "x", "", "— (Rust CLI)"),
    ]
    rounds = len(samples["dyno status"])
    notes = [
        f"{rounds} interleaved rounds after {args.warmup} warm-up rounds; each figure a median of wall "
        "time per process, ratios of the medians.",
        "dyno status: a real daemon on this host, plaintext; the RPC itself takes ~0.5 ms (daemon.py).",
    ]
    report("cli_startup", figures, notes, {name: summarize_ns(values) for name, values in samples.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
