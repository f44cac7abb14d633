"""Prometheus and Alertmanager as Debian ships them (``peers.ALERTING_ENGINES``), run by a test as
processes on loopback, with the configurations deploy/ gives users and only the timings a test cannot
wait for changed.

:func:`prometheus_config` and :func:`alertmanager_config` render deploy/'s files with
:data:`TEST_TIMINGS` and the test's own addresses; :func:`differences` lists where a rendering departs
from deploy/, so that a test can hold it to those places alone. Each engine keeps its data in the
test's folder, listens on a port the OS gave, and is started and stopped by the test (never a service).
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from harness import REPO, free_port, stop_process, wait_until

PROMETHEUS = Path("/usr/bin/prometheus")
ALERTMANAGER = Path("/usr/bin/prometheus-alertmanager")
PROMTOOL = Path("/usr/bin/promtool")
AMTOOL = Path("/usr/bin/amtool")
# Debian's Alertmanager loads its notification templates from here: without it no configuration loads.
AM_TEMPLATES = Path("/usr/share/prometheus/alertmanager/default.tmpl")

RULES = REPO / "deploy" / "prometheus" / "alerts-dynolog.yml"
SCRAPE = REPO / "deploy" / "prometheus" / "scrape-dynolog.yml"
ROUTE = REPO / "deploy" / "alertmanager" / "msmonitor-route.yml"
NODES_JOB = "dynolog-nodes"  # the bare-metal scrape job of SCRAPE, whose targets a test replaces
RESPOND_RECEIVER = "msmonitor-respond"  # the receiver of ROUTE that posts to `dyno respond`
READY_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Timings:
    """The durations a test shortens: deploy/'s are minutes, which no test can wait."""

    scrape_interval: str = "1s"
    evaluation_interval: str = "1s"
    # Every rule's `for:`. A loaded machine slows a rank for a second or three now and then (its 1 s
    # reports are sampled windows), and while `dyno respond` traces the job (4-7 s here) the ranks'
    # monitors are paused: their last figures stand still in Prometheus, a noisy one too. 8 s outlasts
    # both; deploy's 5 minutes outlast them by far.
    pending_for: str = "8s"
    group_wait: str = "1s"
    group_interval: str = "1s"


TEST_TIMINGS = Timings()


def load(path: Path) -> Dict[str, Any]:
    return yaml.safe_load(path.read_text())  # type: ignore[no-any-return]


def rules(timings: Timings = TEST_TIMINGS) -> Dict[str, Any]:
    """deploy/'s alert rules, each pending for *timings*' ``pending_for`` instead of minutes."""
    rendered = load(RULES)
    for group in rendered["groups"]:
        for rule in group["rules"]:
            rule["for"] = timings.pending_for
    return rendered


def prometheus_config(
    targets: Sequence[str], rules_file: Path, alertmanager: str, timings: Timings = TEST_TIMINGS
) -> Dict[str, Any]:
    """prometheus.yml as deploy/ tells users to write it for bare metal: its ``dynolog-nodes`` scrape
    job (scraping *targets*), the alert rules in *rules_file*, alerts to *alertmanager* (host:port)."""
    (job,) = [job for job in load(SCRAPE)["scrape_configs"] if job["job_name"] == NODES_JOB]
    job["scrape_interval"] = timings.scrape_interval
    job["static_configs"] = [{"targets": list(targets)}]
    return {
        "global": {
            "scrape_interval": timings.scrape_interval,
            "evaluation_interval": timings.evaluation_interval,
        },
        "rule_files": [str(rules_file)],
        "scrape_configs": [job],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
    }


def alertmanager_config(url: str, token_file: Path, timings: Timings = TEST_TIMINGS) -> Dict[str, Any]:
    """deploy/'s Alertmanager route, posting to *url* with the bearer token in *token_file*."""
    rendered = load(ROUTE)
    for route in rendered["route"]["routes"]:
        route["group_wait"] = timings.group_wait
        route["group_interval"] = timings.group_interval
    for webhook in respond_webhooks(rendered):
        webhook["url"] = url
        webhook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    return rendered


def respond_webhooks(config: Dict[str, Any]) -> List[Dict[str, Any]]:
    (receiver,) = [r for r in config["receivers"] if r["name"] == RESPOND_RECEIVER]
    return receiver["webhook_configs"]  # type: ignore[no-any-return]


Where = Tuple[Any, ...]  # keys and list indexes from the top of a YAML document


def differences(deployed: Any, rendered: Any, at: Where = ()) -> List[Where]:
    """Where *rendered* departs from *deployed* (parsed YAML): the path of each value that differs, or
    is in one and not the other."""
    if isinstance(deployed, dict) and isinstance(rendered, dict):
        found: List[Where] = []
        for key in sorted(set(deployed) | set(rendered), key=str):
            if key not in deployed or key not in rendered:
                found.append((*at, key))
            else:
                found += differences(deployed[key], rendered[key], (*at, key))
        return found
    if isinstance(deployed, list) and isinstance(rendered, list) and len(deployed) == len(rendered):
        return [d for i, (a, b) in enumerate(zip(deployed, rendered)) for d in differences(a, b, (*at, i))]
    return [] if deployed == rendered else [at]


def http_json(url: str, body: Optional[Any] = None, timeout: float = 5.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read() or b"null")


def ready(url: str) -> bool:
    """Whether ``GET url`` answers 200 (an engine's ``/-/ready``)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200  # type: ignore[no-any-return]
    except OSError:
        return False


@dataclass
class Engine:
    """One engine process on 127.0.0.1:<a free port>, its configuration and data in *workdir*, its
    output in ``<workdir>/<name>.log`` (a file: nothing has to read it for the engine to go on)."""

    binary: Path
    workdir: Path
    config: Dict[str, Any]
    port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]

    @property
    def name(self) -> str:
        return self.binary.name

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def flags(self, config_file: Path) -> List[str]:
        raise NotImplementedError

    def start(self) -> Engine:
        """Started and answering ``/-/ready``."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config_file = self.workdir / f"{self.name}.yml"
        config_file.write_text(yaml.safe_dump(self.config, sort_keys=False))
        with self.log_file.open("w") as log:
            self.proc = subprocess.Popen(
                [str(self.binary), *self.flags(config_file)], stdout=log, stderr=subprocess.STDOUT
            )
        wait_until(self._ready, READY_TIMEOUT_S, what=f"{self.name} on {self.address} to be ready")
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{self.log()}")
        return ready(f"{self.url}/-/ready")

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


class Prometheus(Engine):
    def flags(self, config_file: Path) -> List[str]:
        # Debian's defaults are root's folders under /var/lib/prometheus: the test's own instead.
        return [
            f"--config.file={config_file}",
            f"--storage.tsdb.path={self.workdir / 'tsdb'}",
            f"--web.listen-address={self.address}",
        ]

    def targets_up(self) -> int:
        """How many scrape targets answered their last scrape."""
        active = http_json(f"{self.url}/api/v1/targets")["data"]["activeTargets"]
        return sum(target["health"] == "up" for target in active)

    def query(self, expr: str) -> List[Dict[str, Any]]:
        """The instant vector *expr* evaluates to now (each: ``metric``, its labels, and ``value``)."""
        query = urllib.parse.urlencode({"query": expr})
        return http_json(f"{self.url}/api/v1/query?{query}")["data"]["result"]  # type: ignore[no-any-return]

    def alerts(self, name: str) -> List[Dict[str, Any]]:
        """The alerts of rule *name* now pending or firing (state, labels, activeAt)."""
        found = http_json(f"{self.url}/api/v1/alerts")["data"]["alerts"]
        return [a for a in found if a["labels"].get("alertname") == name]


class Alertmanager(Engine):
    def flags(self, config_file: Path) -> List[str]:
        return [
            f"--config.file={config_file}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address={self.address}",
            "--cluster.listen-address=",  # no gossip port (0.0.0.0:9094 by default): a lone instance
        ]

    def post(self, alerts: List[Dict[str, Any]]) -> None:
        """Alerts as Prometheus sends them (``labels``, ``annotations``, ``startsAt``…), straight in."""
        http_json(f"{self.url}/api/v2/alerts", alerts)


def prometheus_with_rules(workdir: Path, targets: Sequence[str], alertmanager: Alertmanager) -> Prometheus:
    """A Prometheus scraping *targets* with deploy/'s rules at test timings, alerting *alertmanager*."""
    workdir.mkdir(parents=True, exist_ok=True)
    rules_file = workdir / RULES.name
    rules_file.write_text(yaml.safe_dump(rules(), sort_keys=False))
    return Prometheus(PROMETHEUS, workdir, prometheus_config(targets, rules_file, alertmanager.address))
