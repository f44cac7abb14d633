"""Daemon settings and their command line, in the spellings dynolog and msMonitor documents use.

Both ``--flag-name`` and ``--flag_name`` are accepted, booleans also as gflags writes them
(``--flag=true``, ``--noflag``), and ``--flagfile`` reads one flag per line as dynolog's systemd unit does.
"""

from __future__ import annotations

import argparse
import os
import pwd
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

from . import __version__

NO_CERTS = "NO_CERTS"
# Flags of the C++ dynolog that an existing flagfile may carry; accepted with a warning.
IGNORED_UPSTREAM_FLAGS = (
    "enable_perf_monitor",
    "enable_gpu_monitor",
    "kernel_monitor_reporting_interval_s",
    "perf_monitor_reporting_interval_s",
    "dcgm_reporting_interval_s",
    "use_ODS",
    "use_scuba",
    "use_fbrelay",
    "logtostderr",
)


@dataclass
class DaemonConfig:
    port: int = 1778
    listen_address: str = "127.0.0.1"
    enable_ipc_monitor: bool = False
    certs_dir: Optional[str] = None
    log_file: Optional[Path] = None
    log_level: str = "INFO"
    process_keepalive_s: float = 60.0
    ipc_socket_dir: str = ""
    msmonitor_socket_dir: str = ""  # msMonitor's dynolog.sock and dynolog_data.sock; "" = off
    metric_log_dir: Optional[Path] = None  # TensorBoard event files
    prometheus_address: str = "127.0.0.1"
    prometheus_port: int = 0  # 0: no Prometheus exporter
    use_json: bool = False  # a rotating JSONL metrics file beside the log
    ipc_allowed_uids: List[int] = field(default_factory=list)
    key_password_file: Optional[Path] = None
    operator_clients: Optional[List[str]] = None  # None: not given, every valid client is an operator
    read_only_clients: List[str] = field(default_factory=list)
    trace_roots: List[str] = field(default_factory=list)
    ignored_flags: List[str] = field(default_factory=list)

    @property
    def grpc_target(self) -> str:
        host = self.listen_address
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


def default_log_file() -> Path:
    """``/var/log/dynolog.log`` when writable, else the user's state directory (XDG)."""
    system = Path("/var/log/dynolog.log")
    if os.access(system.parent, os.W_OK) and (not system.exists() or os.access(system, os.W_OK)):
        return system
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "dynolog" / "dynolog.log"


def _home() -> str:
    """The daemon user's home from the password database, as msMonitor's daemon finds it."""
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return str(Path.home())


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port in 0..65535 (0: any free port), got {text}")
    return value


def _uids(text: str) -> List[int]:
    try:
        return [int(u) for u in text.split(",") if u.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numeric uids, got {text!r}") from None


def _patterns(text: str) -> List[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _spellings(name: str) -> List[str]:
    dashed = "--" + name.replace("_", "-")
    underscored = "--" + name.replace("-", "_")
    return [dashed] if dashed == underscored else [dashed, underscored]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dynolog",
        description="Per-node daemon of msMonitor: serves `dyno` over gRPC and the processes of this node "
        "over local IPC.",
        epilog="Flags may be written --flag-name or --flag_name. "
        "Example: dynolog --enable-ipc-monitor --log-file /tmp/dynolog.log",
    )
    add = parser.add_argument

    def flag(name: str, **kwargs: object) -> None:
        add(*_spellings(name), dest=name.replace("-", "_"), **kwargs)  # type: ignore[arg-type]

    def switch(name: str, help: str) -> None:
        flag(name, nargs="?", const=True, default=False, type=_bool, metavar="BOOL", help=help)

    flag("port", type=_port, default=1778, help="gRPC port (default 1778; 0 picks a free one)")
    flag(
        "listen-address",
        default="127.0.0.1",
        help="address the gRPC server binds (default 127.0.0.1, loopback only)",
    )
    switch("enable-ipc-monitor", "serve the local IPC that processes register through")
    flag(
        "certs-dir",
        default=None,
        help=f"directory with ca.crt, server.crt, server.key for mutual TLS, or {NO_CERTS} for plaintext",
    )
    flag("log-file", type=Path, default=None, help="rotating log (default /var/log/dynolog.log or XDG state)")
    flag("log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper)
    flag(
        "process-keepalive-s",
        type=_positive,
        default=60.0,
        help="forget a process not heard from for this long (default 60)",
    )
    flag(
        "ipc-socket-dir",
        default="",
        help="pathname sockets in this directory instead of the abstract name @dynolog@ "
        "(as KINETO_IPC_SOCKET_DIR; for containers)",
    )
    flag(
        "msmonitor-socket-dir",
        default=None,
        help="where msMonitor's clients find dynolog.sock and dynolog_data.sock (default: this user's home; "
        "'' turns them off)",
    )
    flag(
        "metric-log-dir",
        type=Path,
        default=None,
        help="write npu-monitor reports as TensorBoard event files here",
    )
    flag(
        "prometheus-address",
        default="127.0.0.1",
        help="address of the Prometheus exporter (default 127.0.0.1)",
    )
    flag(
        "prometheus-port", type=_port, default=0, help="serve npu-monitor reports to Prometheus on this port"
    )
    add(
        "--use-JSON",
        "--use_JSON",
        "--use-json",
        "--use_json",
        dest="use_json",
        nargs="?",
        const=True,
        default=False,
        type=_bool,
        metavar="BOOL",
        help="also write npu-monitor reports to dynolog_metrics.jsonl beside the log file (rotating)",
    )
    flag(
        "ipc-allowed-uids",
        type=_uids,
        default=[],
        help="uids allowed to talk to the IPC, comma-separated (default: the daemon's own uid and root)",
    )
    flag(
        "key-password-file",
        type=Path,
        default=None,
        help="file holding the password of an encrypted server.key (or set DYNOLOG_KEY_PASSWORD; "
        "never on the command line)",
    )
    flag(
        "operator-clients",
        type=_patterns,
        action="extend",
        default=None,
        metavar="PATTERNS",
        help="comma-separated patterns (fnmatch) on client certificate CNs allowed every RPC; once given, "
        "other clients are refused unless --read-only-clients matches them (default: all are operators)",
    )
    flag(
        "read-only-clients",
        type=_patterns,
        action="extend",
        default=[],
        metavar="PATTERNS",
        help="comma-separated patterns on client certificate CNs that may only read (status, version, "
        "processes, watches)",
    )
    flag(
        "trace-root",
        action="append",
        default=[],
        metavar="DIR",
        help="repeatable: trace output paths sent by clients must lie under one of these directories",
    )
    add("--flagfile", help="read flags from this file, one per line (as dynolog's systemd unit does)")
    add("--version", action="version", version=f"dynolog {__version__}")
    for name in IGNORED_UPSTREAM_FLAGS:
        add(
            *_spellings(name),
            dest=f"ignored_{name}",
            nargs="?",
            const="",
            default=None,
            help=argparse.SUPPRESS,
        )
    return parser


def expand_flagfiles(argv: Sequence[str]) -> List[str]:
    """Replace each ``--flagfile=F`` with F's flags (blank lines and ``#`` comments skipped)."""
    expanded: List[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--flagfile" and args:
            arg = "--flagfile=" + args.pop(0)
        if arg.startswith("--flagfile="):
            path = Path(arg.split("=", 1)[1])
            try:
                lines = path.read_text().splitlines()
            except OSError as exc:
                raise SystemExit(f"dynolog: cannot read --flagfile {path}: {exc.strerror}") from None
            expanded += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        else:
            expanded.append(arg)
    return expanded


def _gflags_negations(argv: Sequence[str]) -> List[str]:
    """gflags' ``--noflag`` spelling of a false boolean."""
    out = []
    for arg in argv:
        name = arg[4:].replace("-", "_") if arg.startswith("--no") else ""
        out.append(f"--{name}=false" if name in ("enable_ipc_monitor",) else arg)
    return out


def parse_args(argv: Sequence[str]) -> DaemonConfig:
    parser = build_parser()
    ns = parser.parse_args(_gflags_negations(expand_flagfiles(argv)))
    ignored = [name for name in IGNORED_UPSTREAM_FLAGS if getattr(ns, f"ignored_{name}") is not None]
    return DaemonConfig(
        port=ns.port,
        listen_address=ns.listen_address,
        enable_ipc_monitor=ns.enable_ipc_monitor,
        certs_dir=ns.certs_dir,
        log_file=ns.log_file or default_log_file(),
        log_level=ns.log_level,
        process_keepalive_s=ns.process_keepalive_s,
        ipc_socket_dir=ns.ipc_socket_dir,
        msmonitor_socket_dir=_home() if ns.msmonitor_socket_dir is None else ns.msmonitor_socket_dir,
        metric_log_dir=ns.metric_log_dir,
        prometheus_address=ns.prometheus_address,
        prometheus_port=ns.prometheus_port,
        use_json=ns.use_json,
        ipc_allowed_uids=ns.ipc_allowed_uids or sorted({os.getuid(), 0}),
        key_password_file=ns.key_password_file,
        operator_clients=ns.operator_clients,
        read_only_clients=ns.read_only_clients,
        trace_roots=ns.trace_root,
        ignored_flags=ignored,
    )
