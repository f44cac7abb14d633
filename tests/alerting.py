"""The scene `dyno respond` works in, for its end-to-end test and its benchmark: three daemons on
127.0.0.2-4 under mutual TLS (tests/test_fanout.py's :class:`Cluster`), each exporting npu-monitor's
reports to Prometheus on its own address; one 3-rank gloo job (tests/workloads/train.py), a rank behind
each daemon, monitored every second, each rank able to slow from outside (``--slow-file``); Prometheus
scraping the three exporters with deploy/'s alert rules; Alertmanager with deploy/'s route, posting to
``dyno respond`` (tests/respond_harness.py's :class:`RespondProcess`). Everything is a real process,
started here and stopped on the way out of :func:`scene`, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, TypeVar

import certs_factory as cf
from dynocerts.policy import Role
from engines import ALERTMANAGER, Alertmanager, Prometheus, alertmanager_config, prometheus_with_rules
from harness import Workload, free_port, wait_until
from respond_harness import RespondProcess, incident_files
from test_fanout import Cluster

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")  # rank r behind HOSTS[r]
JOB_ID = "77"
ALERT = "MsMonitorSlowestRank"
# A slowed rank's sort (16 times --sort-size: ~27 ms here) and the others' work (~3 ms) both fit in a
# step, and every rank begins each step at the same instant (train.py pads the ranks of an all-reducing
# job to the same multiples of 40 ms), so the others wait ~24 ms of the 40 in the all-reduce: in the
# trace the slow rank computes ~9 times the median, still twice where a loaded machine and the profiler
# stretch the others' work to 13 ms. (In 20 ms steps and an 8 times bigger sort, idle time then counted
# as compute, no rank stood out.)
STEP_MS = 40.0
ITERATIONS = 2  # steps `dyno respond` traces
TOKEN = "s3cret-for-the-test"
# Not the cluster's 3 s: a rank busy writing its trace is not heard from for seconds, and a daemon that
# forgot it would drop its series from the exporter, resolving the alert while the rank is still slow.
KEEPALIVE = ("--process-keepalive-s", "30")
T = TypeVar("T")


def token_file(path: Path, token: str = TOKEN) -> Path:
    """*token* in a file only its owner reads (`dyno respond` refuses one others can read)."""
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def respond_args(workdir: Path, token: Path, *flags: str) -> List[str]:
    """`dyno respond`'s flags: the hosts in a file, incidents and the nodes' traces under *workdir*."""
    workdir.mkdir(parents=True, exist_ok=True)
    hostfile = workdir / "hosts.txt"
    hostfile.write_text("".join(f"{host}\n" for host in HOSTS))
    return [
        "--hosts-from", f"file:{hostfile}", "--iterations", str(ITERATIONS), "--token-file", str(token),
        "--collect", str(workdir / "incidents"), "--log-file", str(workdir / "node-traces"), *flags,
    ]  # fmt: skip


def webhook_url(respond: RespondProcess) -> str:
    return f"http://127.0.0.1:{respond.port}/alerts"


def incidents(respond: RespondProcess) -> List[Dict[str, Any]]:
    """Every incident *respond* recorded so far (``<collect>/<id>/incident.json``), oldest first."""
    return [json.loads(path.read_text()) for path in incident_files(collect_dir(respond))]


def collect_dir(respond: RespondProcess) -> Path:
    return Path(respond.args[list(respond.args).index("--collect") + 1])


@dataclass
class Scene:
    workdir: Path
    cluster: Cluster
    prometheus: Optional[Prometheus] = None
    alertmanager: Optional[Alertmanager] = None
    respond: Optional[RespondProcess] = None
    jobs: List[Workload] = field(default_factory=list)

    def slow_file(self, rank: int) -> Path:
        return self.workdir / f"slow{rank}"  # as Cluster.train_one_job names it

    def slow(self, rank: int) -> None:
        """From its next step, rank *rank* sorts 16 times more numbers each step."""
        self.slow_file(rank).touch()

    def fast(self, rank: int) -> None:
        self.slow_file(rank).unlink()

    def incidents(self) -> List[Dict[str, Any]]:
        assert self.respond is not None
        return incidents(self.respond)

    def ranks_exporting(self, name: str = "aten::sort") -> int:
        """How many of the job's ranks Prometheus has a figure of operator *name* for."""
        assert self.prometheus is not None
        series = self.prometheus.query(f'msmonitor_top_records{{job="{JOB_ID}",name="{name}"}}')
        return len({s["metric"]["rank"] for s in series})

    def start_daemons(self, exporter_port: int, flags: Sequence[str]) -> None:
        """A daemon on each of HOSTS, its exporter on that address and *exporter_port*."""

        def start(host: str) -> None:
            exporter = ("--prometheus-address", host, "--prometheus-port", str(exporter_port))
            self.cluster.start(host, extra=(*exporter, *KEEPALIVE, *flags))

        start(HOSTS[0])  # the others listen on the port it was given
        with ThreadPoolExecutor(len(HOSTS)) as pool:
            list(pool.map(start, HOSTS[1:]))

    def start_job(self) -> None:
        """The three ranks, started together (each waits in the gloo group for the others)."""
        args = ["--step-ms", str(STEP_MS)]
        self.jobs.extend(self.cluster.train_one_job(HOSTS, JOB_ID, args, slow_files=self.workdir))

    def monitor(self) -> None:
        """npu-monitor on every rank: CPU operators' self time (the Kernel kind), a report a second."""
        result = self.cluster.dyno(
            "--hosts", ",".join(HOSTS), "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
            "--mspti-activity-kind", "Kernel",
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr

    def wait(self, probe: Callable[[], T], timeout: float, what: str) -> T:
        """:func:`wait_until`, failing with `dyno respond`'s log and Alertmanager's (it stops them)."""
        try:
            return wait_until(probe, timeout, what)
        except AssertionError as exc:
            logs = self.respond.stop()[1] if self.respond is not None else ""
            logs += self.alertmanager.log() if self.alertmanager is not None else ""
            raise AssertionError(f"{exc}\n{logs}") from None

    def stop(self) -> None:
        """Everything, side by side (one after another took seconds of the test's minute)."""
        stops: List[Callable[[], Any]] = [job.stop for job in self.jobs]
        if self.respond is not None and self.respond.proc is not None and self.respond.proc.poll() is None:
            stops.append(self.respond.stop)
        stops += [engine.stop for engine in (self.alertmanager, self.prometheus) if engine is not None]
        with ThreadPoolExecutor(len(stops) or 1) as pool:
            list(pool.map(lambda stop: stop(), stops))
        with ThreadPoolExecutor(len(HOSTS)) as pool:  # the jobs first: a rank must not outlive its daemon
            list(pool.map(lambda daemon: daemon.cleanup(), self.cluster.daemons.values()))


@contextlib.contextmanager
def scene(
    workdir: Path, daemon_flags: Sequence[str] = (), respond_flags: Sequence[str] = ()
) -> Iterator[Scene]:
    """The whole scene, ready: Prometheus has the job's figures from all three ranks. *daemon_flags* and
    *respond_flags* are more flags for each daemon and for `dyno respond`."""
    ca = cf.authority()
    client = cf.certs_dir(workdir / "client", Role.CLIENT, ca, cf.leaf(ca, Role.CLIENT, "operator"))
    the_scene = Scene(workdir, Cluster(workdir / "cluster", ca, client))
    exporter_port, token = free_port(), token_file(workdir / "webhook.token")
    alertmanager = Alertmanager(ALERTMANAGER, workdir / "alertmanager", {})
    targets = [f"{host}:{exporter_port}" for host in HOSTS]
    try:
        # Prometheus first: it takes up new targets and Alertmanagers on a 5 s tick, while the rest starts.
        the_scene.prometheus = prometheus_with_rules(workdir / "prometheus", targets, alertmanager).start()
        the_scene.start_daemons(exporter_port, daemon_flags)
        dyno = the_scene.cluster.dyno.options  # --port, --certs-dir
        the_scene.respond = RespondProcess(respond_args(workdir / "respond", token, *respond_flags), dyno)
        the_scene.respond.start()
        alertmanager.config = alertmanager_config(webhook_url(the_scene.respond), token)
        the_scene.alertmanager = alertmanager.start()
        the_scene.start_job()
        the_scene.monitor()
        wait_until(
            lambda: the_scene.ranks_exporting() == len(HOSTS), 30, what="every rank's figures in Prometheus"
        )
        yield the_scene
    finally:
        the_scene.stop()
