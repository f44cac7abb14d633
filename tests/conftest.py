from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import pytest

from harness import Daemon, Workload, read_line_until, stop_process


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start real dynolog processes (each in its own socket directory); all stopped at the end."""
    started: List[Daemon] = []

    def start(*args: str, workdir: Path | None = None, **kwargs: object) -> Daemon:
        daemon = Daemon(workdir or tmp_path / f"daemon{len(started)}", args, **kwargs)  # type: ignore[arg-type]
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.cleanup()


@pytest.fixture
def daemon(start_daemon: Callable[..., Daemon]) -> Daemon:
    return start_daemon()


@pytest.fixture
def start_workload() -> Iterator[Callable[..., Workload]]:
    """Start workload processes from tests/workloads; every one is stopped at the end."""
    started: List[Workload] = []

    def start(script: str, env: dict, *args: str) -> Workload:
        workload = Workload(script, env, args)
        started.append(workload)
        return workload.start()

    yield start
    for workload in started:
        workload.stop()


# --- selection: `make check` is `pytest -m "not torch and not slow"` -----------------------------------
# `torch` (a real PyTorch training process) is said by each module that starts one: pytestmark = torch.
# The marks below are given here, by folder and by module, so that a new test there has them too.
TESTS = Path(__file__).resolve().parent
# Modules (relative to tests/) of slow integration tests on two cores, with why; `make test` runs them.
SLOW_MODULES: Dict[str, str] = {
    "test_soak.py": "a thousand simulated plugin processes for 30 s, and starting and stopping them",
    "test_peer_mindspore.py": "MindSpore's own virtual environment (a ~1 GB download) and CPU training",
    "test_peer_msprof_analyze.py": "msprof-analyze's own virtual environment (a ~350 MB download)",
    "test_plugin_hostile.py": "a real job against hostile and flooding daemons until its link recovers",
    "fuzz/test_fuzz_daemon.py": "floods and fuzzes a live daemon over gRPC and its sockets",
}


@pytest.fixture
def netns_holder() -> Iterator[int]:
    """A process holding a fresh network namespace (loopback up): its abstract names, ``@dynolog@``
    among them, are nobody else's. Its pid is what a Daemon's or Workload's ``netns_of`` takes."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("unshare(1) and ip(8) are needed for a private network namespace")
    holder = subprocess.Popen(
        ["unshare", "--net", "--", "sh", "-c", "ip link set lo up && echo ready pid=$$ && exec cat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = read_line_until(holder, "ready")
    yield int(line.split("pid=")[1])
    stop_process(holder)


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if TESTS not in path.parents:
            continue
        module = path.relative_to(TESTS).as_posix()
        if module.startswith("plugin/"):
            item.add_marker(pytest.mark.plugin)
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


# Tests CI may skip (a test id, or a module's path for all its tests), each with the reason; any other
# skip fails a CI run, since a skip can hide a failure.
EXPECTED_SKIPS: Dict[str, str] = {
    "tests/test_service_analyser.py": "MindIE's analyser is source, not on PyPI: a check by hand",
}


def _expected_skip(nodeid: str) -> bool:
    return nodeid in EXPECTED_SKIPS or nodeid.split("::", 1)[0] in EXPECTED_SKIPS


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not os.environ.get("CI"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = [r.nodeid for r in reporter.stats.get("skipped", []) if not _expected_skip(r.nodeid)]
    if skipped:
        reporter.write_line(f"CI: {len(skipped)} unexpected skip(s), each may hide a failure:", red=True)
        for nodeid in skipped:
            reporter.write_line(f"  {nodeid}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
