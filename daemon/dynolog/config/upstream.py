"""The flags of the C++ daemons (dynolog, msMonitor's, their glog) that this one does not need: accepted
with a warning, so that an existing flagfile or systemd unit keeps working, and their values checked as
gflags would check them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict


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


# gflags' value types, checked as the C++ daemon would check them although the value is unused.
GFLAGS_TYPES: Dict[str, Callable[[str], Any]] = {"int32": int, "uint32": int, "string": str}
