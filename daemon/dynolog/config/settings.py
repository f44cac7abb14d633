"""The daemon's settings (:class:`DaemonConfig`), each declared with its flag, and where the daemon keeps
its files when no flag says (the log, the state folder)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional

from msmonitor_contract.vocabulary import DEFAULT_PORT, msmonitor_socket_dir, split_list

from ..incidents.detector import Settings as DetectorSettings
from ..ipc.cap import DEFAULT_MAX_CLIENTS
from .flags import count, flag, positive, tcp_port, uid_list, unlimited_or_count, unlimited_or_rate

NO_CERTS = "NO_CERTS"

# The detector's defaults are its flags': it counts nanoseconds and fractions of a kind's time, the
# flags microseconds and percent (converted here, both ways).
_DETECTOR = DetectorSettings()
_NS_PER_US = 1000
_PERCENT = 100


@dataclass
class DaemonConfig:
    """Every setting of the daemon, each with its flag; ``None`` defaults are resolved at parse time."""

    port: int = flag(DEFAULT_PORT, f"gRPC port (default {DEFAULT_PORT}; 0 picks a free one)", type=tcp_port)
    listen_address: str = flag(
        "127.0.0.1", "address the gRPC server binds (default 127.0.0.1, loopback only)"
    )
    enable_ipc_monitor: bool = flag(False, "serve the local IPC that processes register through")
    legacy_rpc: bool = flag(
        True,
        "also serve, on the same port, the JSON RPC of dynolog's and msMonitor's dyno binaries "
        "(in TLS under --certs-dir); --legacy-rpc=off serves gRPC alone",
    )
    certs_dir: Optional[str] = flag(
        None, f"directory with ca.crt, server.crt, server.key for mutual TLS, or {NO_CERTS} for plaintext"
    )
    log_file: Optional[Path] = flag(
        None, "rotating log (default /var/log/dynolog.log or XDG state)", type=Path
    )
    logtostderr: bool = flag(
        False,
        "log to stderr as well as to the file (a container's log, journald); "
        "on by itself when stderr is a terminal",
    )
    log_level: str = flag(
        "INFO", "log level (default INFO)", choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper
    )
    process_keepalive_s: float = flag(
        60.0, "forget a process not heard from for this long (default 60)", type=positive
    )
    ipc_socket_dir: str = flag(
        "",
        "pathname sockets in this directory instead of the abstract name @dynolog@ "
        "(as KINETO_IPC_SOCKET_DIR; for containers)",
    )
    msmonitor_socket_dir: Optional[str] = flag(
        None,
        "where msMonitor's clients find dynolog.sock and dynolog_data.sock (default: "
        "$MSMONITOR_IPC_SOCKET_DIR, else this user's home; '' turns them off)",
    )
    metric_log_dir: Optional[Path] = flag(
        None, "write npu-monitor reports as TensorBoard event files here", type=Path
    )
    prometheus_address: str = flag("127.0.0.1", "address of the Prometheus exporter (default 127.0.0.1)")
    prometheus_port: int = flag(0, "serve npu-monitor reports to Prometheus on this port", type=tcp_port)
    # exporter-toolkit's file and flag name, so one file protects every exporter of a node.
    prometheus_web_config: Optional[Path] = flag(
        None,
        "exporter-toolkit's web configuration (YAML: tls_server_config, basic_auth_users) for the "
        "Prometheus exporter: HTTPS, client certificates, bcrypt-hashed users; needs the extra "
        "msmonitor-dynolog[prometheus-auth]",
        names=("--prometheus-web-config", "--prometheus_web_config", "--web.config.file"),
        type=Path,
        metavar="FILE",
    )
    use_json: bool = flag(
        False,
        "also write npu-monitor reports to dynolog_metrics.jsonl beside the log file (rotating)",
        names=("--use-JSON", "--use_JSON", "--use-json", "--use_json"),
    )
    ipc_allowed_uids: List[int] = flag(
        [],
        "uids allowed to talk to the IPC, comma-separated (default: the daemon's own uid and root)",
        type=uid_list,
    )
    max_ipc_clients: int = flag(
        DEFAULT_MAX_CLIENTS,
        f"processes registered at once through the IPC, at most (default {DEFAULT_MAX_CLIENTS}), and "
        "half of it per uid where several uids are allowed; past it a new process "
        "gets no answer, is logged by pid and uid, and registers once another leaves",
        type=count,
        metavar="PROCESSES",
    )
    key_password_file: Optional[Path] = flag(
        None,
        "file holding the password of an encrypted server.key (or set DYNOLOG_KEY_PASSWORD; "
        "never on the command line)",
        type=Path,
    )
    # None: not given, and every valid client is an operator.
    operator_clients: Optional[List[str]] = flag(
        None,
        "comma-separated patterns (fnmatch) on client certificate CNs allowed every RPC; once given, "
        "other clients are refused unless --read-only-clients matches them (default: all are operators)",
        type=split_list,
        action="extend",
        metavar="PATTERNS",
    )
    read_only_clients: List[str] = flag(
        [],
        "comma-separated patterns on client certificate CNs that may only read (status, version, "
        "processes, watches)",
        type=split_list,
        action="extend",
        metavar="PATTERNS",
    )
    trace_roots: List[str] = flag(
        [],
        "repeatable: trace output paths sent by clients must lie under one of these directories",
        names=("--trace-root", "--trace_root"),
        action="append",
        metavar="DIR",
    )
    # Per client (its certificate CN under mutual TLS, else its IP address); docs/security.md.
    client_rate_limit: float = flag(
        200.0,
        "gRPC calls per second each client may make, sustained, before RESOURCE_EXHAUSTED "
        "(default 200; 0: unlimited). A client is its certificate's CN, or its address without TLS",
        type=unlimited_or_rate,
        metavar="PER_SECOND",
    )
    client_rate_burst: int = flag(
        1000,
        "gRPC calls a client may make at once above --client-rate-limit (default 1000)",
        type=count,
        metavar="CALLS",
    )
    legacy_connection_rate: float = flag(
        50.0,
        "legacy JSON RPC connections per second each sender (a local user, a remote address) may open, "
        "sustained (default 50; 0: unlimited); more are closed unread, as each costs the daemon far "
        "more than a gRPC call",
        type=unlimited_or_rate,
        metavar="PER_SECOND",
    )
    legacy_connection_burst: int = flag(
        100,
        "legacy JSON RPC connections a sender may open at once above --legacy-connection-rate (default 100)",
        type=count,
        metavar="CONNECTIONS",
    )
    tls_handshake_rate: float = flag(
        50.0,
        "TLS connections per second each sender (a local user, a remote address) may open, sustained "
        "(default 50; 0: unlimited); more are closed before their handshake costs the daemon any work "
        "(on the port in front of gRPC: not with --legacy-rpc=off)",
        type=unlimited_or_rate,
        metavar="PER_SECOND",
    )
    tls_handshake_burst: int = flag(
        100,
        "TLS connections a sender may open at once above --tls-handshake-rate (default 100)",
        type=count,
        metavar="CONNECTIONS",
    )
    max_client_streams: int = flag(
        64,
        "streams (watches, dyno dynamic sessions) each client may hold open at once (default 64; "
        "0: unlimited)",
        type=unlimited_or_count,
        metavar="STREAMS",
    )
    # npu-monitor --auto-trace: the detector's windows (the thresholds travel with each start).
    auto_trace_dir: Optional[Path] = flag(
        None,
        "where --auto-trace writes its traces (default: traces/ in the daemon's state folder when the log "
        "is under /var/log, else beside the log file)",
        type=Path,
    )
    incident_window: int = flag(
        _DETECTOR.window,
        f"report intervals in a name's baseline (its median and MAD) (default {_DETECTOR.window})",
        type=count,
    )
    incident_warmup: int = flag(
        _DETECTOR.warmup,
        "first report intervals of each monitoring session that are never judged "
        f"(default {_DETECTOR.warmup})",
        type=unlimited_or_count,
    )
    incident_min_baseline: int = flag(
        _DETECTOR.min_samples,
        "intervals a name needs in its baseline before it can raise an incident "
        f"(default {_DETECTOR.min_samples})",
        type=count,
    )
    incident_noise_k: float = flag(
        _DETECTOR.noise_k,
        "a slow interval must also exceed the baseline by this many MADs (scaled to a standard "
        f"deviation) (default {_DETECTOR.noise_k:g})",
        type=unlimited_or_rate,
    )
    incident_min_us: float = flag(
        _DETECTOR.min_total_ns / _NS_PER_US,
        "names with less time than this in an interval are not judged "
        f"(default {_DETECTOR.min_total_ns / _NS_PER_US:g} us)",
        type=unlimited_or_rate,
    )
    incident_min_share: float = flag(
        _DETECTOR.min_share * _PERCENT,
        "names with less than this share of their kind's time on their device in an interval are not "
        f"judged, in percent (default {_DETECTOR.min_share * _PERCENT:g})",
        type=unlimited_or_rate,
        metavar="PERCENT",
    )
    ignored_flags: List[str] = field(default_factory=list)  # the C++ dynolog's, found in the arguments

    @property
    def grpc_target(self) -> str:
        host = self.listen_address
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def detector_settings(self) -> DetectorSettings:
        """The --incident-* flags in the detector's units."""
        return DetectorSettings(
            window=self.incident_window,
            warmup=self.incident_warmup,
            min_samples=self.incident_min_baseline,
            noise_k=self.incident_noise_k,
            min_total_ns=int(self.incident_min_us * _NS_PER_US),
            min_share=self.incident_min_share / _PERCENT,
        )

    def resolved(self) -> DaemonConfig:
        """The defaults that depend on where the daemon runs."""
        return dataclasses.replace(
            self,
            log_file=self.log_file or default_log_file(),
            msmonitor_socket_dir=(
                msmonitor_socket_dir(os.environ)
                if self.msmonitor_socket_dir is None
                else self.msmonitor_socket_dir
            ),
            ipc_allowed_uids=self.ipc_allowed_uids or sorted({os.getuid(), 0}),
        )


def default_log_file() -> Path:
    """``/var/log/dynolog.log`` when writable, else the user's state directory (XDG)."""
    system = Path("/var/log/dynolog.log")
    if os.access(system.parent, os.W_OK) and (not system.exists() or os.access(system, os.W_OK)):
        return system
    return user_state_dir(os.environ) / "dynolog.log"


def user_state_dir(environ: Mapping[str, str]) -> Path:
    """This user's state folder for dynolog (XDG): ``$XDG_STATE_HOME/dynolog``, else
    ``~/.local/state/dynolog``."""
    return Path(environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "dynolog"
