from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from harness import Daemon, Workload


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
