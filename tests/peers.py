"""Published code the tests run against (nobody here wrote it), fetched from PyPI once and reused.

Everything lands under ``.peers/`` (ignored by git): wheels are unpacked as they were published, and a
heavy peer gets a virtual environment of its own so the project's own install stays lean.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Sequence

from harness import REPO

PEERS = REPO / ".peers"
WHEELS = PEERS / "wheels"


def wheel(requirement: str, *pip_args: str) -> Path:
    """The wheel file of *requirement* (``name==version``), downloaded without its dependencies."""
    name, version = requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(WHEELS.glob(pattern))
    if not found:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(WHEELS)]
        subprocess.run([*command, *pip_args, requirement], check=True, timeout=600)
        found = sorted(WHEELS.glob(pattern))
    if not found:
        raise FileNotFoundError(f"pip downloaded no wheel matching {pattern} into {WHEELS}")
    return found[-1]


def unpacked(requirement: str, *pip_args: str, members: str = "") -> Path:
    """*requirement*'s wheel unpacked into its own folder (only the paths under *members* when given),
    ready to put on ``PYTHONPATH``."""
    target = PEERS / requirement.replace("==", "-")
    if not target.exists():
        partial = target.with_name(target.name + ".partial")
        with zipfile.ZipFile(wheel(requirement, *pip_args)) as archive:
            names = [n for n in archive.namelist() if n.startswith(members)]
            archive.extractall(partial, names)
        partial.rename(target)  # only a complete unpack is ever reused
    return target


def venv(name: str, requirements: Sequence[str], python: str = sys.executable) -> Path:
    """The python of a virtual environment under ``.peers/<name>`` with *requirements* installed; made
    once (a marker file says it is complete) and reused by later runs."""
    root = PEERS / name
    marker = root / ".complete"
    python_bin = root / "bin" / "python"
    if not marker.exists():
        subprocess.run([python, "-m", "venv", "--clear", str(root)], check=True, timeout=300)
        subprocess.run(
            [str(python_bin), "-m", "pip", "install", "-q", *requirements], check=True, timeout=1800
        )
        marker.write_text("\n".join(requirements) + "\n")
    return python_bin
