"""The daemon and the CLI as operators install them, on the oldest Python they support.

`make test-py39` runs this with .venv39/bin/python: Python 3.9 with the wheels' runtime dependencies
only (`pip install ./plugin .`, no extras, no test tools). It checks that every module imports, that the
TensorBoard sink's extra is really optional, and that the daemon serves `dyno` in plaintext and in mutual
TLS. It is a script, not a pytest module: pytest is not installed there. Exit 0, or a traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List

from harness import Daemon, Workload, dyno, wait_until

PACKAGES = ("dynolog", "dyno", "dynoproto", "dynocerts", "msmonitor_plugin")
OPTIONAL = {"dynolog.monitoring.sinks.tensorboard": "tensorboardX"}  # module -> what only its extra installs
EXTRA_HINT = "pip install 'msmonitor-dynolog[tensorboard]'"


def import_everything() -> int:
    """Import every module of the installed packages (not the checkout); how many."""
    count = 0
    for top in PACKAGES:
        package = importlib.import_module(top)
        where = Path(package.__file__ or "").resolve()
        assert where.is_relative_to(Path(sys.prefix).resolve()), f"{top} is not the installed one: {where}"
        for module in pkgutil.walk_packages(package.__path__, f"{top}."):
            if module.name.endswith(".__main__"):  # running it is starting the program
                continue
            missing = OPTIONAL.get(module.name)
            if missing is None:
                importlib.import_module(module.name)
            else:
                try:
                    importlib.import_module(module.name)
                except ModuleNotFoundError as exc:
                    assert exc.name == missing, f"{module.name}: {exc}"
                else:
                    raise AssertionError(f"{module.name} imported although {missing} is an extra")
            count += 1
    return count


def daemon_in(work: Path, *args: str) -> Daemon:
    work.mkdir()
    return Daemon(work, args=args)


@contextlib.contextmanager
def running(daemon: Daemon) -> Iterator[Daemon]:
    try:
        yield daemon.start()
    finally:
        daemon.cleanup()


def metric_log_dir_without_the_extra(work: Path) -> None:
    """--metric-log-dir without tensorboardX: the start fails with one line that names the extra."""
    daemon = daemon_in(work / "tb", "--metric-log-dir", str(work / "events"))
    try:
        result = subprocess.run(daemon.command(), capture_output=True, text=True, timeout=30)
    finally:
        daemon.cleanup()
    lines: List[str] = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1 and EXTRA_HINT in lines[0], result


def plaintext(work: Path) -> None:
    with running(daemon_in(work / "plain")) as daemon:
        status = daemon.dyno_json("status")
        assert status["ipc_enabled"] is True, status
        job = Workload("idle.py", daemon.plugin_env(), ("--init",)).start()
        try:
            wait_until(lambda: daemon.process(job.pid), what=f"process {job.pid} in dyno processes")
            listing = daemon.dyno("processes", expect=0).stdout
            assert str(job.pid) in listing, listing
        finally:
            job.stop()


def mutual_tls(work: Path) -> None:
    pki = work / "pki"
    dyno(
        "certs", "init", str(pki), "--server-hosts", "localhost,127.0.0.1", "--client-name", "smoke", expect=0
    )
    with running(daemon_in(work / "tls", "--certs-dir", str(pki / "server"))) as daemon:
        status = daemon.dyno_json("--hostname", "localhost", "--certs-dir", str(pki / "client"), "status")
        assert status["tls"] is True, status
        refused = daemon.dyno("--hostname", "localhost", "status")  # no client certificate
        assert refused.returncode != 0, refused


def main() -> None:
    assert importlib.util.find_spec("numpy") is None, "numpy is installed: only [tensorboard] may bring it"
    modules = import_everything()
    with tempfile.TemporaryDirectory(prefix="py39") as tmp:
        work = Path(tmp)
        metric_log_dir_without_the_extra(work)
        plaintext(work)
        mutual_tls(work)
    print(f"Python {sys.version.split()[0]}: {modules} modules imported; daemon, dyno and mutual TLS work")


if __name__ == "__main__":
    main()
