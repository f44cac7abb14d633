"""The distributions operators install: both wheels pass `twine check`, say which Pythons they support,
and keep the TensorBoard sink's libraries (tensorboardX, numpy) in the ``[tensorboard]`` extra, without
which the daemon still starts and ``--metric-log-dir`` stops the start with the command that fixes it.

Python 3.9 itself, with the runtime dependencies alone, is `make test-py39` (tests/py39_smoke.py).
"""

from __future__ import annotations

import email
import os
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from harness import REPO, Daemon

EXTRA_HINT = "pip install 'msmonitor-dynolog[tensorboard]'"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """Both wheels, built offline from the checkout as `pip install ./plugin .` builds them."""
    out = tmp_path_factory.mktemp("wheels")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run([*pip_wheel, "-w", str(out), "./plugin", "."], cwd=REPO, check=True, timeout=120)
    return {p.name.split("-")[0]: p for p in out.glob("*.whl")}


def metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(archive.read(name))


def test_both_wheels_pass_twine_check(wheels: Dict[str, Path]) -> None:
    assert sorted(wheels) == ["msmonitor_dynolog", "msmonitor_plugin"]
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, wheels.values())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout.count("PASSED") == 2, result.stdout + result.stderr


def test_the_wheels_state_their_pythons_and_keep_numpy_in_the_extra(wheels: Dict[str, Path]) -> None:
    plugin, daemon = metadata(wheels["msmonitor_plugin"]), metadata(wheels["msmonitor_dynolog"])
    assert plugin["Requires-Python"] == ">=3.8" and daemon["Requires-Python"] == ">=3.9"
    assert plugin.get_all("Requires-Dist") is None  # standard library only
    requires: List[str] = daemon.get_all("Requires-Dist") or []
    for library in ("tensorboardx", "numpy", "torch"):
        for line in requires:
            if line.lower().startswith(library):
                assert "extra ==" in line, f"{line}: the base install must not need {library}"
    assert any(r.lower().startswith("tensorboardx") and "extra == 'tensorboard'" in r for r in requires)


@pytest.fixture
def numpy_hidden(tmp_path: Path) -> Dict[str, str]:
    """An environment whose Python cannot import numpy, as on a node installed without the extra."""
    site = tmp_path / "no_numpy"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['numpy'] = None\n")
    return {"PYTHONPATH": str(site)}


def test_without_numpy_the_daemon_serves(
    start_daemon: Callable[..., Daemon], numpy_hidden: Dict[str, str]
) -> None:
    daemon = start_daemon(env=numpy_hidden)
    assert daemon.dyno_json("status")["ipc_enabled"] is True


def test_without_numpy_metric_log_dir_fails_at_start_naming_the_extra(
    tmp_path: Path, numpy_hidden: Dict[str, str]
) -> None:
    daemon = Daemon(tmp_path, ("--metric-log-dir", str(tmp_path / "events")), env=numpy_hidden)
    try:
        result = subprocess.run(
            daemon.command(), capture_output=True, text=True, timeout=30, env={**os.environ, **daemon.env}
        )
    finally:
        daemon.cleanup()
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1, result
    assert lines[0].startswith("dynolog: --metric-log-dir needs tensorboardX") and EXTRA_HINT in lines[0]
    assert "numpy" in lines[0]  # what is missing, as Python said it
    assert not (tmp_path / "events").exists()
