"""The README's runnable blocks, run as written: what a newcomer pastes must work.

Every block fenced ```sh runs on its own with ``set -e`` (each command must succeed), as a user pastes
it at the repository's root, on a machine of its own: a network namespace (its own loopback, so port
1778 and the abstract socket ``@dynolog@`` are free), a mount namespace whose ``/var/log`` is empty, a
pid namespace (whatever the block leaves running ends with it), and a fresh working directory holding
the repository's ``examples/``, which is also ``HOME``. The Quick start also runs in a terminal with job
control on, where a background job that reads its terminal is stopped. The install line is the set-up's
(``make test`` installed both distributions): there, ``pip install`` checks they import.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import List, NamedTuple

import pytest

pytestmark = pytest.mark.torch  # the blocks start examples/train.py, a real PyTorch job

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
BLOCK_S = 50.0  # each block's bound, under the suite's 60 s per test

# `pip install` is what the set-up already did: check its result instead of installing again offline.
PRELUDE = """\
pip() { [ "$1" = install ] && python -c 'import msmonitor_plugin, dynolog, dyno' || command pip "$@"; }
"""


class Block(NamedTuple):
    section: str
    line: int  # the README line of its first command
    text: str


def readme_blocks() -> List[Block]:
    text = (ROOT / "README.md").read_text()
    blocks = []
    for match in re.finditer(r"^```sh\n(.*?)^```$", text, re.M | re.S):
        before = text[: match.start()]
        section = re.findall(r"^#+ (.*)$", before, re.M)[-1]
        blocks.append(Block(section, before.count("\n") + 2, match.group(1)))
    return blocks


BLOCKS = readme_blocks()


def test_the_quick_start_and_the_security_steps_are_runnable_blocks() -> None:
    assert {"Quick start", "Security"} <= {b.section for b in BLOCKS}, [b.section for b in BLOCKS]


def run_block(block: Block, workdir: Path, terminal: bool = False) -> subprocess.CompletedProcess[str]:
    (workdir / "examples").symlink_to(ROOT / "examples")
    script = workdir / "block.sh"
    script.write_text(PRELUDE + block.text)
    shell = f"bash -e {'-m ' if terminal else ''}{script}"
    if terminal:  # a pty as its terminal, as when pasted; `script` passes on the block's exit status
        shell = f"script -qec '{shell}' /dev/null"
    inside = f"ip link set lo up && mount -t tmpfs tmpfs /var/log && exec {shell}"
    env = {**os.environ, "HOME": str(workdir), "PATH": f"{BIN}:{os.environ['PATH']}"}
    for name in ("MSMONITOR_USE_DAEMON", "KINETO_USE_DAEMON", "KINETO_IPC_SOCKET_DIR", "RANK"):
        env.pop(name, None)
    namespaces = ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child"]
    return subprocess.run(
        [*namespaces, "--", "sh", "-c", inside],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_S,
    )


def check(result: subprocess.CompletedProcess[str], block: Block) -> None:
    assert result.returncode == 0, (
        f"README line {block.line} ({block.section}) exited {result.returncode}:\n"
        f"{result.stdout}\n{result.stderr}"
    )


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.section}@{b.line}" for b in BLOCKS])
def test_a_readme_block_runs_pasted_into_a_script(block: Block, tmp_path: Path) -> None:
    check(run_block(block, tmp_path), block)
    if block.section == "Quick start":  # the trace it waited for is there
        assert list((tmp_path / "traces").rglob("*.json")), sorted(tmp_path.rglob("*"))


def test_the_quick_start_runs_in_a_terminal_with_job_control(tmp_path: Path) -> None:
    quick_start = next(b for b in BLOCKS if b.section == "Quick start")
    check(run_block(quick_start, tmp_path, terminal=True), quick_start)
    assert list((tmp_path / "traces").rglob("*.json"))


def test_make_demo_walks_through_every_step_and_leaves_nothing_running(tmp_path: Path) -> None:
    """The README's first command, after the set-up `make demo` does first (the venv): its script."""
    with subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a demo stopped for its time takes its daemon and job with it
    ) as child:
        try:
            out, err = child.communicate(timeout=BLOCK_S)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
    demo = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "demo: no answer within" not in demo.stdout, demo.stdout
    steps = re.findall(r"^== (\d+)\.", demo.stdout, re.M)
    assert steps == [str(n) for n in range(1, 10)], demo.stdout
    assert demo.stdout.count("commandStatus: effective") >= 4, demo.stdout
    assert "Traceback" not in demo.stdout + demo.stderr
    left = [p.name for p in tmp_path.iterdir() if not p.name.startswith("torchinductor")]  # torch's cache
    assert not left, f"the demo left files behind: {left}"
