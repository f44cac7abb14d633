"""Published code the tests run against (nobody here wrote it), fetched from PyPI once and reused.

Everything lands under ``.peers/`` (ignored by git): wheels are unpacked as they were published, and a
heavy peer gets a virtual environment of its own so the project's own install stays lean. Only the set-up
step fetches (``make peers``: :func:`fetch_all`); a test asks for its peer with :func:`need`, which never
downloads: a missing peer skips the test with one line saying what to run, and fails it in CI.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, List, Sequence, Set

import pytest

import engines
from harness import REPO, Daemon, Workload, read_line_until

PEERS = REPO / ".peers"
WHEELS = PEERS / "wheels"
FETCH = "make peers"  # the set-up step that fetches every peer a test needs


@dataclass(frozen=True)
class Peer:
    """One peer: *made* says whether the set-up step made it here, *use* gives what a test runs (cheap,
    and never a download, once *made*), *make* fetches and builds it (the set-up step's work)."""

    name: str
    made: Callable[[], bool]
    use: Callable[[], Path]
    make: Callable[[], Path]
    how: str = f"run `{FETCH}`"  # how a person gets it, where it is missing
    opt_in: bool = False  # no set-up step makes it: it skips even in CI (conftest.py's EXPECTED_SKIPS)


def need(peer: Peer) -> Path:
    """What a test runs of *peer*; where the set-up step did not make it, the test skips saying so — or,
    in CI (``CI`` set), where every peer but an opt-in one must be there, fails with the same line."""
    if peer.made():
        return peer.use()
    line = f"{peer.name} is missing: {peer.how}"
    if os.environ.get("CI") and not peer.opt_in:
        pytest.fail(line, pytrace=False)
    pytest.skip(line)


def wheel(requirement: str, *pip_args: str) -> Path:
    """The wheel file of *requirement* (``name==version``), downloaded without its dependencies."""
    name, version = requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(WHEELS.glob(pattern))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=PEERS) as scratch:  # only a whole download is ever reused
            command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", scratch]
            subprocess.run([*command, *pip_args, requirement], check=True, timeout=600)
            for downloaded in Path(scratch).glob(pattern):
                downloaded.rename(WHEELS / downloaded.name)
        found = sorted(WHEELS.glob(pattern))
    if not found:
        raise FileNotFoundError(f"pip downloaded no wheel matching {pattern} into {WHEELS}")
    return found[-1]


def unpacked_path(requirement: str) -> Path:
    return PEERS / requirement.replace("==", "-")


def unpacked(requirement: str, *pip_args: str, members: Sequence[str] = ("",)) -> Path:
    """*requirement*'s wheel unpacked into its own folder (only the paths under *members* when given),
    ready to put on ``PYTHONPATH``."""
    target = unpacked_path(requirement)
    if not target.exists():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(wheel(requirement, *pip_args)) as archive:
            names = [n for n in archive.namelist() if n.startswith(tuple(members))]
            archive.extractall(partial, names)
        partial.rename(target)  # only a complete unpack is ever reused
    return target


TORCH_NPU = "torch-npu==2.13.0"
STAND_INS = Path(__file__).resolve().parent / "stand_ins"


def torch_npu_python() -> Path:
    """A ``torch_npu`` package made of the published wheel's pure Python (its dynamic profiler and the
    helpers it imports) with ``tests/stand_ins/torch_npu`` laid over it for the C extension and the
    device: the folder to put on ``PYTHONPATH``."""
    # The Python in the wheel is the same on every platform: take the x86_64 one wherever we run.
    published = unpacked(
        TORCH_NPU,
        *("--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--only-binary=:all:"),
        members=("torch_npu/profiler/", "torch_npu/utils/", "torch_npu/_init/"),
    )
    target = PEERS / "torch_npu-python"
    shutil.rmtree(target, ignore_errors=True)  # rebuilt each session: the stand-ins may have changed
    shutil.copytree(published, target)
    shutil.copytree(STAND_INS / "torch_npu", target / "torch_npu", dirs_exist_ok=True)
    return target


def venv_python(name: str) -> Path:
    return PEERS / name / "bin" / "python"


def venv_made(name: str, requirements: Sequence[str]) -> bool:
    """Whether ``.peers/<name>`` holds *requirements* (its marker file lists what it holds)."""
    marker = PEERS / name / ".complete"
    return marker.exists() and marker.read_text() == "\n".join(requirements) + "\n"


def venv(name: str, requirements: Sequence[str], python: str = sys.executable) -> Path:
    """The python of a virtual environment under ``.peers/<name>`` with *requirements* installed; made
    once and reused by later runs, remade when *requirements* change."""
    root = PEERS / name
    python_bin = venv_python(name)
    if not venv_made(name, requirements):
        subprocess.run([python, "-m", "venv", "--clear", str(root)], check=True, timeout=300)
        subprocess.run(
            [str(python_bin), "-m", "pip", "install", "-q", *requirements], check=True, timeout=1800
        )
        (root / ".complete").write_text("\n".join(requirements) + "\n")
    return python_bin


# MindSpore's CPU wheel, for its own dynamic profiler (tests/test_peer_mindspore.py). Its extension modules
# are built against NumPy 1.x while it asks only for numpy>=1.25: pip would pick NumPy 2, which they
# refuse ("compiled using NumPy 1.x"). The project's plugin goes in editable, as a user installs it, so
# MindSpore's ``from IPCMonitor import PyDynamicMonitorProxy`` finds it and its .pth hook runs.
MINDSPORE = ("mindspore==2.10.0", "numpy==1.26.4", "-e", str(REPO / "plugin"))


def mindspore() -> Path:
    """The python of the MindSpore peer's virtual environment (about 3 GB; a few minutes the first time)."""
    return venv("mindspore", MINDSPORE)


MINDSPORE_PEER = Peer(
    "MindSpore's environment",
    lambda: venv_made("mindspore", MINDSPORE),
    lambda: venv_python("mindspore"),
    mindspore,
)


@dataclass
class PeerWorkload(Workload):
    """A workload from tests/workloads run by a peer's *python* rather than the project's."""

    lines: List[str] = field(default_factory=list)  # everything it printed after its ready line

    def start(self) -> PeerWorkload:
        super().start()
        threading.Thread(target=self._collect, daemon=True).start()
        return self

    def _collect(self) -> None:
        """Keep what it prints (for failure messages), so a full pipe never blocks it."""
        assert self.proc is not None
        with contextlib.suppress(AssertionError, OSError, ValueError):
            while True:
                self.lines.append(read_line_until(self.proc, "", timeout=24 * 3600))

    def announced(self, name: str) -> str:
        """The value of ``name=value`` in its ready line."""
        return self.ready.split(f"{name}=")[1].split()[0]


# MindSpore forks its monitor helper only in the process that creates the node's shared memory, named
# by the hour; a process of the same hour that finds it takes itself for another rank of that job.
MINDSPORE_SHM = Path("/dev/shm")
MINDSPORE_SHM_PREFIX = "DynamicProfileShm"


def mindspore_job(daemon: Daemon) -> PeerWorkload:
    """tests/workloads/mindspore_train.py run by MindSpore's python, in dyno mode against *daemon*: its
    ready line announces ``pid``, ``helper`` (the monitor helper MindSpore forked) and ``shm``."""
    remove_stale_mindspore_memory()
    env = {
        **daemon.client_env(),
        "MSMONITOR_USE_DAEMON": "1",
        "MSMONITOR_IPC_SOCKET_DIR": str(daemon.socket_dir),  # where $HOME/dynolog.sock would be
        "RANK_ID": "0",
    }
    job = PeerWorkload("mindspore_train.py", env, python=str(need(MINDSPORE_PEER))).start()
    if job.announced("helper") == "0":
        job.stop()
        raise RuntimeError(
            f"MindSpore forked no monitor helper: {MINDSPORE_SHM / job.announced('shm')} belongs to "
            "another MindSpore process of this hour"
        )
    return job


def remove_stale_mindspore_memory() -> None:
    """MindSpore's shared memory that no process maps any more (a killed job's): MindSpore's advice is
    to remove it, and while it is there a new job forks no helper."""
    stale = set(MINDSPORE_SHM.glob(MINDSPORE_SHM_PREFIX + "*"))
    for maps in Path("/proc").glob("[0-9]*/maps"):
        if not stale:
            return
        with contextlib.suppress(OSError):
            text = maps.read_text()
            stale = {shm for shm in stale if str(shm) not in text}
    for shm in stale:
        with contextlib.suppress(FileNotFoundError):
            shm.unlink()


# MindStudio's cluster analyser (pure Python; pandas, numpy, SQLAlchemy…), which reads npu-monitor's
# msmonitor_*.db files (tests/test_peer_msprof_analyze.py).
MSPROF_ANALYZE = ("msprof-analyze==26.2.0",)


def msprof_analyze() -> Path:
    """The ``msprof-analyze`` command of its virtual environment (about 350 MB; a minute the first time)."""
    return venv("msprof-analyze", MSPROF_ANALYZE).with_name("msprof-analyze")


MSPROF_ANALYZE_PEER = Peer(
    "msprof-analyze's environment",
    lambda: venv_made("msprof-analyze", MSPROF_ANALYZE),
    lambda: venv_python("msprof-analyze").with_name("msprof-analyze"),
    msprof_analyze,
)

# msserviceprofiler's vLLM hooks, run unchanged against our ms_service_profiler (tests/test_service.py).
MSSERVICEPROFILER = "msserviceprofiler==1.2.3"
MSSERVICEPROFILER_PEER = Peer(
    "msserviceprofiler's wheel",
    unpacked_path(MSSERVICEPROFILER).exists,
    lambda: unpacked_path(MSSERVICEPROFILER),
    lambda: unpacked(MSSERVICEPROFILER),
)
# torch-npu: its wheel's Python, which torch_npu_python() lays the stand-ins over (no download once made).
TORCH_NPU_PEER = Peer(
    "torch-npu's wheel", unpacked_path(TORCH_NPU).exists, torch_npu_python, torch_npu_python
)
# MindIE's service analyser is source, not on PyPI: opt-in, and no set-up step fetches it.
MINDIE_ANALYSER_SOURCE = os.environ.get("MINDIE_ANALYSER_SOURCE", "")
MINDIE_ANALYSER_PYTHON = os.environ.get("MINDIE_ANALYSER_PYTHON", "")
MINDIE_ANALYSER_PEER = Peer(
    "MindIE's service analyser (opt-in)",
    lambda: bool(MINDIE_ANALYSER_SOURCE and MINDIE_ANALYSER_PYTHON),
    lambda: Path(MINDIE_ANALYSER_SOURCE),
    lambda: Path(MINDIE_ANALYSER_SOURCE),
    "set MINDIE_ANALYSER_SOURCE (an msserviceprofiler checkout) and MINDIE_ANALYSER_PYTHON",
    opt_in=True,
)


class NotMade(Exception):
    """The set-up step cannot make a peer on this machine; the message says how a person can."""


# Prometheus and Alertmanager as Debian ships them (tests/engines.py): system packages, installed by the
# set-up step with apt-get when it runs as root; anyone else is told the command.
ALERTING_PACKAGES = ("prometheus", "prometheus-alertmanager")
APT_INSTALL = ("apt-get", "install", "-y", "--no-install-recommends", *ALERTING_PACKAGES)
ALERTING_FILES = (engines.PROMETHEUS, engines.ALERTMANAGER, engines.AM_TEMPLATES)
# invoke-rc.d asks this script whether a package's scripts may start its service: 101 says no.
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
# apt-get install's words when its package lists are missing or stale: then, and only then, update them.
STALE_LISTS = ("Unable to locate package", "has no installation candidate", "404  Not Found")


def alerting_engines_made() -> bool:
    return all(path.exists() for path in ALERTING_FILES)


def install_alerting_engines() -> Path:
    """Debian's prometheus and prometheus-alertmanager, installed (as root) without starting either."""
    if not alerting_engines_made():
        if os.geteuid() != 0:
            raise NotMade(f"not root: run `{' '.join(APT_INSTALL)}` as root")
        running = engine_processes()
        with services_kept_down():
            if any(words in apt(APT_INSTALL).stderr for words in STALE_LISTS):
                apt(("apt-get", "update"), check=True)
                apt(APT_INSTALL, check=True)
        started = engine_processes() - running
        if started:  # a package's scripts started one despite policy-rc.d: say so rather than leave it
            raise NotMade(f"installing {ALERTING_PACKAGES} started processes {sorted(started)}: stop them")
    if not alerting_engines_made():
        raise NotMade(f"`{' '.join(APT_INSTALL)}` left {[str(p) for p in ALERTING_FILES if not p.exists()]}")
    return engines.PROMETHEUS.parent


def apt(command: Sequence[str], check: bool = False) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    if check and result.returncode != 0:
        raise NotMade(f"`{' '.join(command)}` exited {result.returncode}: {result.stderr.strip()}")
    return result


@contextlib.contextmanager
def services_kept_down() -> Iterator[None]:
    """While inside, invoke-rc.d starts no service (as in a container image); the host's own
    policy-rc.d, if any, is put back afterwards."""
    saved = POLICY_RC_D.with_name(POLICY_RC_D.name + ".msmonitor-saved")
    if POLICY_RC_D.exists():
        POLICY_RC_D.rename(saved)
    try:
        POLICY_RC_D.write_text(
            "#!/bin/sh\n# msMonitor's tests/peers.py: no service starts while it installs\nexit 101\n"
        )
        POLICY_RC_D.chmod(0o755)
        yield
    finally:
        POLICY_RC_D.unlink(missing_ok=True)
        if saved.exists():
            saved.rename(POLICY_RC_D)


def engine_processes() -> Set[int]:
    """Processes running either engine's binary."""
    found = set()
    for exe in Path("/proc").glob("[0-9]*/exe"):
        with contextlib.suppress(OSError):
            if Path(os.readlink(exe)) in ALERTING_FILES:
                found.add(int(exe.parent.name))
    return found


ALERTING_ENGINES = Peer(
    "Prometheus and Alertmanager (Debian's packages)",
    alerting_engines_made,
    lambda: engines.PROMETHEUS.parent,
    install_alerting_engines,
    f"run `{FETCH}` as root, or `{' '.join(APT_INSTALL)}`",
)
# By `make peers`, in this order.
FETCHED = (MSSERVICEPROFILER_PEER, TORCH_NPU_PEER, MSPROF_ANALYZE_PEER, MINDSPORE_PEER, ALERTING_ENGINES)


def fetch_all() -> None:
    """Every peer the suite runs against, made now: the set-up step (``make peers``, which ``make test``
    runs first), so that no test downloads. Each is made once and reused; one this machine cannot make
    (the engines, where the step is not root) is one line saying how, and the tests that need it skip."""
    for peer in FETCHED:
        print(f"peers: {peer.name} ...", flush=True)
        try:
            print(f"peers: {peer.name}: {peer.make()}", flush=True)
        except NotMade as exc:
            print(f"peers: {peer.name}: not made: {exc}", flush=True)


if __name__ == "__main__":
    fetch_all()
