"""Daemon settings and their command line, in the spellings dynolog and msMonitor documents use.

Both ``--flag-name`` and ``--flag_name`` are accepted, and every spelling gflags takes: ``-flag`` as
well as ``--flag``, a value after ``=`` or as the next argument, booleans as ``--flag``, ``--flag=true``
or ``--noflag``; ``--flagfile`` reads one flag per line as dynolog's systemd unit does. The flags of the
C++ daemons that this one does not need are accepted with a warning (IGNORED_UPSTREAM_FLAGS).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set

from msmonitor_contract.vocabulary import DEFAULT_PORT, msmonitor_socket_dir, split_list

from .. import __version__

NO_CERTS = "NO_CERTS"


@dataclass(frozen=True)
class UpstreamFlag:
    """A flag the C++ dynolog, msMonitor's daemon or their glog define that this daemon does not need."""

    gflags_type: str  # "bool": --flag, --flag=BOOL, --noflag; any other type takes a value
    why: str  # why it is not needed here, for the warning

    @property
    def is_bool(self) -> bool:
        return self.gflags_type == "bool"


def _unused(why: str, flags: str) -> Dict[str, UpstreamFlag]:
    """*flags*: ``name:type`` pairs, the type as gflags declares it."""
    pairs = (item.split(":") for item in flags.split())
    return {name: UpstreamFlag(gflags_type, why) for name, gflags_type in pairs}


_SINKS = "npu-monitor reports go to --use_JSON, --prometheus-port or --metric-log-dir instead"
# Accepted, with a warning on stderr and in the log, so an existing flagfile keeps working.
# tests/data/upstream_flags.tsv lists them from the sources, and the tests hold this table to it.
IGNORED_UPSTREAM_FLAGS: Dict[str, UpstreamFlag] = {
    **_unused(
        "this daemon collects no host metrics (kernel, network, perf counters); what it reports comes "
        "from the training processes",
        "enable_perf_monitor:bool kernel_monitor_reporting_interval_s:int32 "
        "perf_monitor_reporting_interval_s:int32 filter_nic_interfaces:bool allow_interface_prefixes:string",
    ),
    **_unused(
        "device metrics come from the training processes' own profilers (npu-monitor), not DCGM or TPU",
        "enable_gpu_monitor:bool dcgm_reporting_interval_s:int32 dcgm_lib_path:string "
        "dcgm_major_version:int32 dcgm_fields:string dcgm_standalone_address:string "
        "enable_env_var_attribution:bool enable_tpu_monitor:bool tpu_reporting_interval_s:int32 "
        "tpu_scrape_timeout_ms:int32 tpu_device_plugin_url:string",
    ),
    **_unused(
        "processes are attributed by the job id they register with, not by Kubernetes pod resources",
        "enable_pod_resources_attribution:bool pod_resources_socket:string pod_resources_gpu_resource:string "
        "pod_resources_tpu_resource:string env_attribution_mappings_file:string",
    ),
    **_unused("the Prometheus exporter is on whenever --prometheus-port is given", "use_prometheus:bool"),
    **_unused(
        f"this metric sink is not built in; {_SINKS}",
        "use_ODS:bool use_scuba:bool use_fbrelay:bool use_udsrelay:bool use_otlp:bool use_otel:bool "
        "use_otel_for_kernel_monitor:bool fbrelay_port:int32 fbrelay_address:string category_id:string "
        "ods_entity_prefix:string scribe_category:string access_token:string certificate_path:string "
        "otel_endpoint:string otel_resource_env_file:string otel_resource_attrs:string "
        "otel_metric_mappings_file:string otlp_endpoint:string otlp_service_name:string otlp_headers:string "
        "otlp_timeout_ms:int32 otlp_max_queue_size:int32 otlp_ssl_ca_cert_path:string "
        "otlp_ssl_client_cert_path:string otlp_ssl_client_key_path:string",
    ),
    **_unused(
        "glog's; this daemon logs to --log-file at --log-level, and to stderr with --logtostderr",
        "alsologtostderr:bool colorlogtostderr:bool colorlogtostdout:bool logtostdout:bool "
        "timestamp_in_logfile_name:bool drop_log_memory:bool log_file_header:bool log_prefix:bool "
        "log_year_in_prefix:bool log_utc_time:bool stop_logging_if_full_disk:bool symbolize_stacktrace:bool "
        "stderrthreshold:int32 minloglevel:int32 logbuflevel:int32 logbufsecs:int32 logcleansecs:int32 "
        "logemaillevel:int32 logfile_mode:int32 max_log_size:uint32 v:int32 alsologtoemail:string "
        "logmailer:string log_dir:string log_link:string log_backtrace_at:string vmodule:string",
    ),
}


def ignored_flag_warning(name: str) -> str:
    return f"--{name} is a flag of the C++ daemon and is ignored here: {IGNORED_UPSTREAM_FLAGS[name].why}"


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


def _at_least(minimum: float, convert: Callable[[str], Any], meaning: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < minimum:
            raise argparse.ArgumentTypeError(f"must be {meaning}, got {text}")
        return value

    return parse


_unlimited_or_rate = _at_least(0, float, "a number >= 0 (0: unlimited)")
_unlimited_or_count = _at_least(0, int, "a whole number >= 0 (0: unlimited)")
_count = _at_least(1, int, "a whole number >= 1")


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port in 0..65535 (0: any free port), got {text}")
    return value


def _uids(text: str) -> List[int]:
    try:
        return [int(u) for u in split_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numeric uids, got {text!r}") from None


def flag(default: Any, help: str, names: Sequence[str] = (), **argparse_options: Any) -> Any:
    """A setting and its command-line flag, declared together: the field's default is the flag's.

    *names* replace the spellings made from the field name (``--flag-name`` and ``--flag_name``);
    *argparse_options* go to ``add_argument`` (``type``, ``choices``, ``metavar``, ``action``).
    """
    spec = {"help": help, "names": tuple(names), **argparse_options}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"flag": spec})
    return field(default=default, metadata={"flag": spec})


@dataclass
class DaemonConfig:
    """Every setting of the daemon, each with its flag; ``None`` defaults are resolved at parse time."""

    port: int = flag(DEFAULT_PORT, f"gRPC port (default {DEFAULT_PORT}; 0 picks a free one)", type=_port)
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
        60.0, "forget a process not heard from for this long (default 60)", type=_positive
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
    prometheus_port: int = flag(0, "serve npu-monitor reports to Prometheus on this port", type=_port)
    use_json: bool = flag(
        False,
        "also write npu-monitor reports to dynolog_metrics.jsonl beside the log file (rotating)",
        names=("--use-JSON", "--use_JSON", "--use-json", "--use_json"),
    )
    ipc_allowed_uids: List[int] = flag(
        [],
        "uids allowed to talk to the IPC, comma-separated (default: the daemon's own uid and root)",
        type=_uids,
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
        type=_unlimited_or_rate,
        metavar="PER_SECOND",
    )
    client_rate_burst: int = flag(
        1000,
        "gRPC calls a client may make at once above --client-rate-limit (default 1000)",
        type=_count,
        metavar="CALLS",
    )
    legacy_connection_rate: float = flag(
        50.0,
        "legacy JSON RPC connections per second each address may open, sustained (default 50; 0: "
        "unlimited); more are closed unread, as each costs the daemon far more than a gRPC call",
        type=_unlimited_or_rate,
        metavar="PER_SECOND",
    )
    legacy_connection_burst: int = flag(
        100,
        "legacy JSON RPC connections an address may open at once above --legacy-connection-rate "
        "(default 100)",
        type=_count,
        metavar="CONNECTIONS",
    )
    max_client_streams: int = flag(
        64,
        "streams (watches, dyno dynamic sessions) each client may hold open at once (default 64; "
        "0: unlimited)",
        type=_unlimited_or_count,
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
        30, "report intervals in a name's baseline (its median and MAD) (default 30)", type=_count
    )
    incident_warmup: int = flag(
        2,
        "first report intervals of each monitoring session that are never judged (default 2)",
        type=_unlimited_or_count,
    )
    incident_min_baseline: int = flag(
        5, "intervals a name needs in its baseline before it can raise an incident (default 5)", type=_count
    )
    incident_noise_k: float = flag(
        3.0,
        "a slow interval must also exceed the baseline by this many MADs (scaled to a standard "
        "deviation) (default 3)",
        type=_unlimited_or_rate,
    )
    incident_min_us: float = flag(
        50.0,
        "names with less time than this in an interval are not judged (default 50 us)",
        type=_unlimited_or_rate,
    )
    incident_min_share: float = flag(
        2.0,
        "names with less than this share of their kind's time on their device in an interval are not "
        "judged, in percent (default 2)",
        type=_unlimited_or_rate,
        metavar="PERCENT",
    )
    ignored_flags: List[str] = field(default_factory=list)  # the C++ dynolog's, found in the arguments

    @property
    def grpc_target(self) -> str:
        host = self.listen_address
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

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


def _spellings(name: str) -> List[str]:
    dashed = "--" + name.replace("_", "-")
    underscored = "--" + name.replace("-", "_")
    return [dashed] if dashed == underscored else [dashed, underscored]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dynolog",
        allow_abbrev=False,  # gflags takes whole names only
        description="Per-node daemon of msMonitor: serves `dyno` over gRPC and the processes of this node "
        "over local IPC.",
        epilog="Flags may be written --flag-name or --flag_name, and as gflags takes them (-flag=value, "
        "-flag value, --noflag). The C++ dynolog's and msMonitor's other flags are accepted with a warning. "
        "Example: dynolog --enable-ipc-monitor --log-file /tmp/dynolog.log",
    )
    for f in dataclasses.fields(DaemonConfig):
        if "flag" not in f.metadata:
            continue
        options = dict(f.metadata["flag"])
        names = options.pop("names") or _spellings(f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.type in ("bool", bool):  # --flag, --flag=true|false (and gflags' --noflag, below)
            options.update(nargs="?", const=True, type=_bool, metavar="BOOL")
        parser.add_argument(*names, dest=f.name, default=default, **options)
    parser.add_argument(
        "--flagfile", help="read flags from this file, one per line (as dynolog's systemd unit does)"
    )
    parser.add_argument("--version", action="version", version=f"dynolog {__version__}")
    for name, upstream in IGNORED_UPSTREAM_FLAGS.items():
        value: Dict[str, Any] = (
            dict(nargs="?", const=True, type=_bool)
            if upstream.is_bool
            else dict(type=_GFLAGS_TYPES[upstream.gflags_type])
        )
        parser.add_argument(
            *_spellings(name), dest=f"ignored_{name}", default=None, help=argparse.SUPPRESS, **value
        )
    return parser


# gflags' value types, checked as the C++ daemon would check them although the value is unused.
_GFLAGS_TYPES: Dict[str, Callable[[str], Any]] = {"int32": int, "uint32": int, "string": str}
_FLAGFILE = ("--flagfile", "-flagfile")


def expand_flagfiles(argv: Sequence[str], within: Sequence[Path] = ()) -> List[str]:
    """Replace each ``--flagfile=F`` (or ``--flagfile F``, ``-flagfile``) with F's flags, one per line,
    blank lines and ``#`` comments skipped; a flagfile may name others, as gflags allows."""
    expanded: List[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, has_value, value = arg.partition("=")
        if name not in _FLAGFILE:
            expanded.append(arg)
            continue
        if not has_value and not args:
            raise SystemExit(f"dynolog: {name} needs a file: {name}=FILE")
        expanded += _read_flagfile(Path(value if has_value else args.pop(0)), within)
    return expanded


def _read_flagfile(path: Path, within: Sequence[Path]) -> List[str]:
    if path.resolve() in within:
        chain = " -> ".join(str(p) for p in (*within, path.resolve()))
        raise SystemExit(f"dynolog: --flagfile {path} includes itself ({chain}); remove the loop")
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SystemExit(f"dynolog: cannot read --flagfile {path}: {exc.strerror}") from None
    flags = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if not text.startswith("-"):  # gflags' per-program sections: a line naming binaries
            raise SystemExit(
                f"dynolog: --flagfile {path} line {number}: {text!r} is not a flag; write one --flag or "
                "--flag=value per line"
            )
        flags.append(text)
    return expand_flagfiles(flags, (*within, path.resolve()))


def _gflags_spellings(argv: Sequence[str], parser: argparse.ArgumentParser) -> List[str]:
    """gflags' spellings in argparse's: ``-flag`` as ``--flag``, and ``--noflag`` (``-noflag``) of a
    boolean as ``--flag=false``. Anything else is left for argparse to accept or refuse by name."""
    options: Set[str] = {option for action in parser._actions for option in action.option_strings}
    booleans = {
        option for action in parser._actions if action.type is _bool for option in action.option_strings
    }
    out = []
    for arg in argv:
        name, has_value, value = arg.partition("=")
        if name.startswith("-") and not name.startswith("--") and "-" + name in options:
            name = "-" + name
        negated = "--" + name.lstrip("-")[2:]
        if (
            not has_value
            and name not in options
            and name.lstrip("-").startswith("no")
            and negated in booleans
        ):
            out.append(negated + "=false")
        else:
            out.append(name + has_value + value)
    return out


def parse_args(argv: Sequence[str]) -> DaemonConfig:
    parser = build_parser()
    ns = parser.parse_args(_gflags_spellings(expand_flagfiles(argv), parser))
    values = {f.name: getattr(ns, f.name) for f in dataclasses.fields(DaemonConfig) if "flag" in f.metadata}
    ignored = [name for name in IGNORED_UPSTREAM_FLAGS if getattr(ns, f"ignored_{name}") is not None]
    return DaemonConfig(**values, ignored_flags=ignored).resolved()
