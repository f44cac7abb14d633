from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClientKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLIENT_KIND_UNSPECIFIED: _ClassVar[ClientKind]
    CLIENT_KIND_PLUGIN: _ClassVar[ClientKind]
    CLIENT_KIND_KINETO: _ClassVar[ClientKind]
    CLIENT_KIND_MSMONITOR: _ClassVar[ClientKind]

class TraceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRACE_STATE_UNINITIALIZED: _ClassVar[TraceState]
    TRACE_STATE_IDLE: _ClassVar[TraceState]
    TRACE_STATE_READY: _ClassVar[TraceState]
    TRACE_STATE_RUNNING: _ClassVar[TraceState]

class MonitorState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MONITOR_STATE_UNINITIALIZED: _ClassVar[MonitorState]
    MONITOR_STATE_IDLE: _ClassVar[MonitorState]
    MONITOR_STATE_RUNNING: _ClassVar[MonitorState]

class CommandStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMMAND_STATUS_UNSPECIFIED: _ClassVar[CommandStatus]
    COMMAND_STATUS_EFFECTIVE: _ClassVar[CommandStatus]
    COMMAND_STATUS_INEFFECTIVE: _ClassVar[CommandStatus]

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_UNSPECIFIED: _ClassVar[Reason]
    REASON_NO_PROCESS_REGISTERED: _ClassVar[Reason]
    REASON_NO_PROCESS_MATCHED: _ClassVar[Reason]
    REASON_NPU_MONITOR_RUNNING: _ClassVar[Reason]
    REASON_TRACE_BUSY: _ClassVar[Reason]
    REASON_START_STEP_PASSED: _ClassVar[Reason]
    REASON_PROCESS_LIMIT: _ClassVar[Reason]
    REASON_NOT_SUPPORTED: _ClassVar[Reason]
    REASON_NPU_TRACE_RUNNING: _ClassVar[Reason]
    REASON_HELD: _ClassVar[Reason]
    REASON_FRAMEWORK_CANNOT: _ClassVar[Reason]
    REASON_OUTPUT_MISSING: _ClassVar[Reason]
    REASON_OUTPUT_UNWRITABLE: _ClassVar[Reason]

class TracePhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRACE_PHASE_UNSPECIFIED: _ClassVar[TracePhase]
    TRACE_PHASE_STAGED: _ClassVar[TracePhase]
    TRACE_PHASE_DELIVERED: _ClassVar[TracePhase]
    TRACE_PHASE_READY: _ClassVar[TracePhase]
    TRACE_PHASE_RUNNING: _ClassVar[TracePhase]
    TRACE_PHASE_FINISHED: _ClassVar[TracePhase]
    TRACE_PHASE_FAILED: _ClassVar[TracePhase]

class DynamicAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DYNAMIC_ACTION_UNSPECIFIED: _ClassVar[DynamicAction]
    DYNAMIC_ACTION_ATTACH: _ClassVar[DynamicAction]
    DYNAMIC_ACTION_START: _ClassVar[DynamicAction]
    DYNAMIC_ACTION_STOP: _ClassVar[DynamicAction]
    DYNAMIC_ACTION_STATUS: _ClassVar[DynamicAction]
    DYNAMIC_ACTION_QUIT: _ClassVar[DynamicAction]

class SessionNews(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_NEWS_UNSPECIFIED: _ClassVar[SessionNews]
    SESSION_NEWS_ATTACHED: _ClassVar[SessionNews]
    SESSION_NEWS_REFUSED: _ClassVar[SessionNews]
    SESSION_NEWS_ALREADY_ATTACHED: _ClassVar[SessionNews]
    SESSION_NEWS_ALREADY_STARTED: _ClassVar[SessionNews]
    SESSION_NEWS_STARTED: _ClassVar[SessionNews]
    SESSION_NEWS_NOT_STARTED: _ClassVar[SessionNews]
    SESSION_NEWS_STOPPED: _ClassVar[SessionNews]
    SESSION_NEWS_STATUS: _ClassVar[SessionNews]
    SESSION_NEWS_QUIT: _ClassVar[SessionNews]
    SESSION_NEWS_IDLE_TIMEOUT: _ClassVar[SessionNews]
    SESSION_NEWS_COMMAND_LIMIT: _ClassVar[SessionNews]
    SESSION_NEWS_PROCESS_GONE: _ClassVar[SessionNews]
    SESSION_NEWS_TASK_ENDED: _ClassVar[SessionNews]
CLIENT_KIND_UNSPECIFIED: ClientKind
CLIENT_KIND_PLUGIN: ClientKind
CLIENT_KIND_KINETO: ClientKind
CLIENT_KIND_MSMONITOR: ClientKind
TRACE_STATE_UNINITIALIZED: TraceState
TRACE_STATE_IDLE: TraceState
TRACE_STATE_READY: TraceState
TRACE_STATE_RUNNING: TraceState
MONITOR_STATE_UNINITIALIZED: MonitorState
MONITOR_STATE_IDLE: MonitorState
MONITOR_STATE_RUNNING: MonitorState
COMMAND_STATUS_UNSPECIFIED: CommandStatus
COMMAND_STATUS_EFFECTIVE: CommandStatus
COMMAND_STATUS_INEFFECTIVE: CommandStatus
REASON_UNSPECIFIED: Reason
REASON_NO_PROCESS_REGISTERED: Reason
REASON_NO_PROCESS_MATCHED: Reason
REASON_NPU_MONITOR_RUNNING: Reason
REASON_TRACE_BUSY: Reason
REASON_START_STEP_PASSED: Reason
REASON_PROCESS_LIMIT: Reason
REASON_NOT_SUPPORTED: Reason
REASON_NPU_TRACE_RUNNING: Reason
REASON_HELD: Reason
REASON_FRAMEWORK_CANNOT: Reason
REASON_OUTPUT_MISSING: Reason
REASON_OUTPUT_UNWRITABLE: Reason
TRACE_PHASE_UNSPECIFIED: TracePhase
TRACE_PHASE_STAGED: TracePhase
TRACE_PHASE_DELIVERED: TracePhase
TRACE_PHASE_READY: TracePhase
TRACE_PHASE_RUNNING: TracePhase
TRACE_PHASE_FINISHED: TracePhase
TRACE_PHASE_FAILED: TracePhase
DYNAMIC_ACTION_UNSPECIFIED: DynamicAction
DYNAMIC_ACTION_ATTACH: DynamicAction
DYNAMIC_ACTION_START: DynamicAction
DYNAMIC_ACTION_STOP: DynamicAction
DYNAMIC_ACTION_STATUS: DynamicAction
DYNAMIC_ACTION_QUIT: DynamicAction
SESSION_NEWS_UNSPECIFIED: SessionNews
SESSION_NEWS_ATTACHED: SessionNews
SESSION_NEWS_REFUSED: SessionNews
SESSION_NEWS_ALREADY_ATTACHED: SessionNews
SESSION_NEWS_ALREADY_STARTED: SessionNews
SESSION_NEWS_STARTED: SessionNews
SESSION_NEWS_NOT_STARTED: SessionNews
SESSION_NEWS_STOPPED: SessionNews
SESSION_NEWS_STATUS: SessionNews
SESSION_NEWS_QUIT: SessionNews
SESSION_NEWS_IDLE_TIMEOUT: SessionNews
SESSION_NEWS_COMMAND_LIMIT: SessionNews
SESSION_NEWS_PROCESS_GONE: SessionNews
SESSION_NEWS_TASK_ENDED: SessionNews

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IpcCounters(_message.Message):
    __slots__ = ("received", "replied", "malformed", "rejected_senders", "send_errors", "handled")
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    REPLIED_FIELD_NUMBER: _ClassVar[int]
    MALFORMED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_SENDERS_FIELD_NUMBER: _ClassVar[int]
    SEND_ERRORS_FIELD_NUMBER: _ClassVar[int]
    HANDLED_FIELD_NUMBER: _ClassVar[int]
    received: int
    replied: int
    malformed: int
    rejected_senders: int
    send_errors: int
    handled: int
    def __init__(self, received: _Optional[int] = ..., replied: _Optional[int] = ..., malformed: _Optional[int] = ..., rejected_senders: _Optional[int] = ..., send_errors: _Optional[int] = ..., handled: _Optional[int] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("hostname", "version", "pid", "uptime_s", "ipc_enabled", "ipc_addresses", "processes", "plugin_processes", "kineto_processes", "ipc", "tls", "msmonitor", "dropped")
    class DroppedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    IPC_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IPC_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    KINETO_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    IPC_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    MSMONITOR_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    version: str
    pid: int
    uptime_s: float
    ipc_enabled: bool
    ipc_addresses: _containers.RepeatedScalarFieldContainer[str]
    processes: int
    plugin_processes: int
    kineto_processes: int
    ipc: IpcCounters
    tls: bool
    msmonitor: MsMonitorStatus
    dropped: _containers.ScalarMap[str, int]
    def __init__(self, hostname: _Optional[str] = ..., version: _Optional[str] = ..., pid: _Optional[int] = ..., uptime_s: _Optional[float] = ..., ipc_enabled: bool = ..., ipc_addresses: _Optional[_Iterable[str]] = ..., processes: _Optional[int] = ..., plugin_processes: _Optional[int] = ..., kineto_processes: _Optional[int] = ..., ipc: _Optional[_Union[IpcCounters, _Mapping]] = ..., tls: bool = ..., msmonitor: _Optional[_Union[MsMonitorStatus, _Mapping]] = ..., dropped: _Optional[_Mapping[str, int]] = ...) -> None: ...

class MsMonitorStatus(_message.Message):
    __slots__ = ("nputrace", "npumonitor", "current_step", "start_step", "stop_step")
    NPUTRACE_FIELD_NUMBER: _ClassVar[int]
    NPUMONITOR_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STEP_FIELD_NUMBER: _ClassVar[int]
    START_STEP_FIELD_NUMBER: _ClassVar[int]
    STOP_STEP_FIELD_NUMBER: _ClassVar[int]
    nputrace: str
    npumonitor: str
    current_step: int
    start_step: int
    stop_step: int
    def __init__(self, nputrace: _Optional[str] = ..., npumonitor: _Optional[str] = ..., current_step: _Optional[int] = ..., start_step: _Optional[int] = ..., stop_step: _Optional[int] = ...) -> None: ...

class GetVersionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetVersionResponse(_message.Message):
    __slots__ = ("version", "api", "python")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    API_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    version: str
    api: str
    python: str
    def __init__(self, version: _Optional[str] = ..., api: _Optional[str] = ..., python: _Optional[str] = ...) -> None: ...

class ProcessInfo(_message.Message):
    __slots__ = ("pid", "host_pid", "ancestors", "job_id", "rank", "local_rank", "world_size", "devices", "backend", "clients", "hostname", "versions", "plugin_version", "capabilities", "registered_at", "last_seen_s", "uid", "current_step", "trace_state", "monitor_state", "held_by", "service", "helper_pids")
    class VersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_PID_FIELD_NUMBER: _ClassVar[int]
    ANCESTORS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    LOCAL_RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_VERSION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_S_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STEP_FIELD_NUMBER: _ClassVar[int]
    TRACE_STATE_FIELD_NUMBER: _ClassVar[int]
    MONITOR_STATE_FIELD_NUMBER: _ClassVar[int]
    HELD_BY_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    HELPER_PIDS_FIELD_NUMBER: _ClassVar[int]
    pid: int
    host_pid: int
    ancestors: _containers.RepeatedScalarFieldContainer[int]
    job_id: int
    rank: int
    local_rank: int
    world_size: int
    devices: _containers.RepeatedScalarFieldContainer[int]
    backend: str
    clients: _containers.RepeatedScalarFieldContainer[ClientKind]
    hostname: str
    versions: _containers.ScalarMap[str, str]
    plugin_version: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    registered_at: float
    last_seen_s: float
    uid: int
    current_step: int
    trace_state: TraceState
    monitor_state: MonitorState
    held_by: str
    service: str
    helper_pids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, pid: _Optional[int] = ..., host_pid: _Optional[int] = ..., ancestors: _Optional[_Iterable[int]] = ..., job_id: _Optional[int] = ..., rank: _Optional[int] = ..., local_rank: _Optional[int] = ..., world_size: _Optional[int] = ..., devices: _Optional[_Iterable[int]] = ..., backend: _Optional[str] = ..., clients: _Optional[_Iterable[_Union[ClientKind, str]]] = ..., hostname: _Optional[str] = ..., versions: _Optional[_Mapping[str, str]] = ..., plugin_version: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., registered_at: _Optional[float] = ..., last_seen_s: _Optional[float] = ..., uid: _Optional[int] = ..., current_step: _Optional[int] = ..., trace_state: _Optional[_Union[TraceState, str]] = ..., monitor_state: _Optional[_Union[MonitorState, str]] = ..., held_by: _Optional[str] = ..., service: _Optional[str] = ..., helper_pids: _Optional[_Iterable[int]] = ...) -> None: ...

class ListProcessesRequest(_message.Message):
    __slots__ = ("job_id", "targets")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    targets: Targets
    def __init__(self, job_id: _Optional[int] = ..., targets: _Optional[_Union[Targets, _Mapping]] = ...) -> None: ...

class ListProcessesResponse(_message.Message):
    __slots__ = ("processes",)
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    def __init__(self, processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ...) -> None: ...

class Targets(_message.Message):
    __slots__ = ("job_id", "pids", "ranks", "process_limit")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    pids: _containers.RepeatedScalarFieldContainer[int]
    ranks: _containers.RepeatedScalarFieldContainer[int]
    process_limit: int
    def __init__(self, job_id: _Optional[int] = ..., pids: _Optional[_Iterable[int]] = ..., ranks: _Optional[_Iterable[int]] = ..., process_limit: _Optional[int] = ...) -> None: ...

class ProcessOutcome(_message.Message):
    __slots__ = ("pid", "host_pid", "rank", "triggered", "reason", "detail", "expected_output")
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_PID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    TRIGGERED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    pid: int
    host_pid: int
    rank: int
    triggered: bool
    reason: Reason
    detail: str
    expected_output: str
    def __init__(self, pid: _Optional[int] = ..., host_pid: _Optional[int] = ..., rank: _Optional[int] = ..., triggered: bool = ..., reason: _Optional[_Union[Reason, str]] = ..., detail: _Optional[str] = ..., expected_output: _Optional[str] = ...) -> None: ...

class CommandResponse(_message.Message):
    __slots__ = ("command_status", "reason", "message", "trace_id", "processes", "processes_matched", "activity_profilers_triggered", "activity_profilers_busy", "event_profilers_triggered", "event_profilers_busy")
    COMMAND_STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_MATCHED_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_PROFILERS_TRIGGERED_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_PROFILERS_BUSY_FIELD_NUMBER: _ClassVar[int]
    EVENT_PROFILERS_TRIGGERED_FIELD_NUMBER: _ClassVar[int]
    EVENT_PROFILERS_BUSY_FIELD_NUMBER: _ClassVar[int]
    command_status: CommandStatus
    reason: Reason
    message: str
    trace_id: str
    processes: _containers.RepeatedCompositeFieldContainer[ProcessOutcome]
    processes_matched: _containers.RepeatedScalarFieldContainer[int]
    activity_profilers_triggered: _containers.RepeatedScalarFieldContainer[int]
    activity_profilers_busy: int
    event_profilers_triggered: _containers.RepeatedScalarFieldContainer[int]
    event_profilers_busy: int
    def __init__(self, command_status: _Optional[_Union[CommandStatus, str]] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., trace_id: _Optional[str] = ..., processes: _Optional[_Iterable[_Union[ProcessOutcome, _Mapping]]] = ..., processes_matched: _Optional[_Iterable[int]] = ..., activity_profilers_triggered: _Optional[_Iterable[int]] = ..., activity_profilers_busy: _Optional[int] = ..., event_profilers_triggered: _Optional[_Iterable[int]] = ..., event_profilers_busy: _Optional[int] = ...) -> None: ...

class NpuTraceRequest(_message.Message):
    __slots__ = ("targets", "log_file", "start_step", "iterations", "duration_ms", "profile_start_time_ms", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "analyse", "async_mode", "activities", "profiler_level", "aic_metrics", "l2_cache", "op_attr", "msprof_tx", "mstx_domain_include", "mstx_domain_exclude", "data_simplification", "export_type", "gc_detect_threshold", "host_sys", "sys_io", "sys_interconnection", "pause_monitor")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    LOG_FILE_FIELD_NUMBER: _ClassVar[int]
    START_STEP_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    RECORD_SHAPES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_MEMORY_FIELD_NUMBER: _ClassVar[int]
    WITH_STACK_FIELD_NUMBER: _ClassVar[int]
    WITH_FLOPS_FIELD_NUMBER: _ClassVar[int]
    WITH_MODULES_FIELD_NUMBER: _ClassVar[int]
    ANALYSE_FIELD_NUMBER: _ClassVar[int]
    ASYNC_MODE_FIELD_NUMBER: _ClassVar[int]
    ACTIVITIES_FIELD_NUMBER: _ClassVar[int]
    PROFILER_LEVEL_FIELD_NUMBER: _ClassVar[int]
    AIC_METRICS_FIELD_NUMBER: _ClassVar[int]
    L2_CACHE_FIELD_NUMBER: _ClassVar[int]
    OP_ATTR_FIELD_NUMBER: _ClassVar[int]
    MSPROF_TX_FIELD_NUMBER: _ClassVar[int]
    MSTX_DOMAIN_INCLUDE_FIELD_NUMBER: _ClassVar[int]
    MSTX_DOMAIN_EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    DATA_SIMPLIFICATION_FIELD_NUMBER: _ClassVar[int]
    EXPORT_TYPE_FIELD_NUMBER: _ClassVar[int]
    GC_DETECT_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    HOST_SYS_FIELD_NUMBER: _ClassVar[int]
    SYS_IO_FIELD_NUMBER: _ClassVar[int]
    SYS_INTERCONNECTION_FIELD_NUMBER: _ClassVar[int]
    PAUSE_MONITOR_FIELD_NUMBER: _ClassVar[int]
    targets: Targets
    log_file: str
    start_step: int
    iterations: int
    duration_ms: int
    profile_start_time_ms: int
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    with_flops: bool
    with_modules: bool
    analyse: bool
    async_mode: bool
    activities: _containers.RepeatedScalarFieldContainer[str]
    profiler_level: str
    aic_metrics: str
    l2_cache: bool
    op_attr: bool
    msprof_tx: bool
    mstx_domain_include: _containers.RepeatedScalarFieldContainer[str]
    mstx_domain_exclude: _containers.RepeatedScalarFieldContainer[str]
    data_simplification: bool
    export_type: str
    gc_detect_threshold: float
    host_sys: _containers.RepeatedScalarFieldContainer[str]
    sys_io: bool
    sys_interconnection: bool
    pause_monitor: bool
    def __init__(self, targets: _Optional[_Union[Targets, _Mapping]] = ..., log_file: _Optional[str] = ..., start_step: _Optional[int] = ..., iterations: _Optional[int] = ..., duration_ms: _Optional[int] = ..., profile_start_time_ms: _Optional[int] = ..., record_shapes: bool = ..., profile_memory: bool = ..., with_stack: bool = ..., with_flops: bool = ..., with_modules: bool = ..., analyse: bool = ..., async_mode: bool = ..., activities: _Optional[_Iterable[str]] = ..., profiler_level: _Optional[str] = ..., aic_metrics: _Optional[str] = ..., l2_cache: bool = ..., op_attr: bool = ..., msprof_tx: bool = ..., mstx_domain_include: _Optional[_Iterable[str]] = ..., mstx_domain_exclude: _Optional[_Iterable[str]] = ..., data_simplification: bool = ..., export_type: _Optional[str] = ..., gc_detect_threshold: _Optional[float] = ..., host_sys: _Optional[_Iterable[str]] = ..., sys_io: bool = ..., sys_interconnection: bool = ..., pause_monitor: bool = ...) -> None: ...

class GpuTraceRequest(_message.Message):
    __slots__ = ("targets", "log_file", "duration_ms", "iterations", "profile_start_time_ms", "profile_start_iteration_roundup", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    LOG_FILE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_START_ITERATION_ROUNDUP_FIELD_NUMBER: _ClassVar[int]
    RECORD_SHAPES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_MEMORY_FIELD_NUMBER: _ClassVar[int]
    WITH_STACK_FIELD_NUMBER: _ClassVar[int]
    WITH_FLOPS_FIELD_NUMBER: _ClassVar[int]
    WITH_MODULES_FIELD_NUMBER: _ClassVar[int]
    targets: Targets
    log_file: str
    duration_ms: int
    iterations: int
    profile_start_time_ms: int
    profile_start_iteration_roundup: int
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    with_flops: bool
    with_modules: bool
    def __init__(self, targets: _Optional[_Union[Targets, _Mapping]] = ..., log_file: _Optional[str] = ..., duration_ms: _Optional[int] = ..., iterations: _Optional[int] = ..., profile_start_time_ms: _Optional[int] = ..., profile_start_iteration_roundup: _Optional[int] = ..., record_shapes: bool = ..., profile_memory: bool = ..., with_stack: bool = ..., with_flops: bool = ..., with_modules: bool = ...) -> None: ...

class TraceProcess(_message.Message):
    __slots__ = ("pid", "host_pid", "rank", "phase", "start_step", "stop_step", "current_step", "output", "files", "error", "warnings", "updated_at", "history")
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_PID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    START_STEP_FIELD_NUMBER: _ClassVar[int]
    STOP_STEP_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STEP_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    pid: int
    host_pid: int
    rank: int
    phase: TracePhase
    start_step: int
    stop_step: int
    current_step: int
    output: str
    files: _containers.RepeatedScalarFieldContainer[str]
    error: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    updated_at: float
    history: _containers.RepeatedCompositeFieldContainer[PhaseChange]
    def __init__(self, pid: _Optional[int] = ..., host_pid: _Optional[int] = ..., rank: _Optional[int] = ..., phase: _Optional[_Union[TracePhase, str]] = ..., start_step: _Optional[int] = ..., stop_step: _Optional[int] = ..., current_step: _Optional[int] = ..., output: _Optional[str] = ..., files: _Optional[_Iterable[str]] = ..., error: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ..., updated_at: _Optional[float] = ..., history: _Optional[_Iterable[_Union[PhaseChange, _Mapping]]] = ...) -> None: ...

class PhaseChange(_message.Message):
    __slots__ = ("phase", "at")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    phase: TracePhase
    at: float
    def __init__(self, phase: _Optional[_Union[TracePhase, str]] = ..., at: _Optional[float] = ...) -> None: ...

class GetTraceRequest(_message.Message):
    __slots__ = ("trace_id",)
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    def __init__(self, trace_id: _Optional[str] = ...) -> None: ...

class TraceInfo(_message.Message):
    __slots__ = ("trace_id", "kind", "created_at", "processes", "done")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    kind: str
    created_at: float
    processes: _containers.RepeatedCompositeFieldContainer[TraceProcess]
    done: bool
    def __init__(self, trace_id: _Optional[str] = ..., kind: _Optional[str] = ..., created_at: _Optional[float] = ..., processes: _Optional[_Iterable[_Union[TraceProcess, _Mapping]]] = ..., done: bool = ...) -> None: ...

class ListTracesRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class PhaseCount(_message.Message):
    __slots__ = ("phase", "processes")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    phase: TracePhase
    processes: int
    def __init__(self, phase: _Optional[_Union[TracePhase, str]] = ..., processes: _Optional[int] = ...) -> None: ...

class TraceSummary(_message.Message):
    __slots__ = ("trace_id", "kind", "created_at", "done", "phases", "folders", "files", "size_bytes")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    PHASES_FIELD_NUMBER: _ClassVar[int]
    FOLDERS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    kind: str
    created_at: float
    done: bool
    phases: _containers.RepeatedCompositeFieldContainer[PhaseCount]
    folders: _containers.RepeatedScalarFieldContainer[str]
    files: int
    size_bytes: int
    def __init__(self, trace_id: _Optional[str] = ..., kind: _Optional[str] = ..., created_at: _Optional[float] = ..., done: bool = ..., phases: _Optional[_Iterable[_Union[PhaseCount, _Mapping]]] = ..., folders: _Optional[_Iterable[str]] = ..., files: _Optional[int] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class ListTracesResponse(_message.Message):
    __slots__ = ("traces",)
    TRACES_FIELD_NUMBER: _ClassVar[int]
    traces: _containers.RepeatedCompositeFieldContainer[TraceSummary]
    def __init__(self, traces: _Optional[_Iterable[_Union[TraceSummary, _Mapping]]] = ...) -> None: ...

class FileChunk(_message.Message):
    __slots__ = ("host", "pid", "host_pid", "rank", "name", "path", "trace", "size", "offset", "data", "error")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_PID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    host: str
    pid: int
    host_pid: int
    rank: int
    name: str
    path: str
    trace: bool
    size: int
    offset: int
    data: bytes
    error: str
    def __init__(self, host: _Optional[str] = ..., pid: _Optional[int] = ..., host_pid: _Optional[int] = ..., rank: _Optional[int] = ..., name: _Optional[str] = ..., path: _Optional[str] = ..., trace: bool = ..., size: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., error: _Optional[str] = ...) -> None: ...

class NpuMonitorRequest(_message.Message):
    __slots__ = ("targets", "start", "stop", "report_interval_s", "duration_s", "activity_kinds", "log_file", "export_type", "jsonl_rotate_log_lines", "jsonl_rotate_log_files", "filter", "top_n", "auto_trace")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    REPORT_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_KINDS_FIELD_NUMBER: _ClassVar[int]
    LOG_FILE_FIELD_NUMBER: _ClassVar[int]
    EXPORT_TYPE_FIELD_NUMBER: _ClassVar[int]
    JSONL_ROTATE_LOG_LINES_FIELD_NUMBER: _ClassVar[int]
    JSONL_ROTATE_LOG_FILES_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    TOP_N_FIELD_NUMBER: _ClassVar[int]
    AUTO_TRACE_FIELD_NUMBER: _ClassVar[int]
    targets: Targets
    start: bool
    stop: bool
    report_interval_s: int
    duration_s: float
    activity_kinds: _containers.RepeatedScalarFieldContainer[str]
    log_file: str
    export_type: str
    jsonl_rotate_log_lines: str
    jsonl_rotate_log_files: str
    filter: str
    top_n: int
    auto_trace: AutoTrace
    def __init__(self, targets: _Optional[_Union[Targets, _Mapping]] = ..., start: bool = ..., stop: bool = ..., report_interval_s: _Optional[int] = ..., duration_s: _Optional[float] = ..., activity_kinds: _Optional[_Iterable[str]] = ..., log_file: _Optional[str] = ..., export_type: _Optional[str] = ..., jsonl_rotate_log_lines: _Optional[str] = ..., jsonl_rotate_log_files: _Optional[str] = ..., filter: _Optional[str] = ..., top_n: _Optional[int] = ..., auto_trace: _Optional[_Union[AutoTrace, _Mapping]] = ...) -> None: ...

class AutoTrace(_message.Message):
    __slots__ = ("slowdown", "for_intervals", "iterations", "cooldown_s", "max_per_day")
    SLOWDOWN_FIELD_NUMBER: _ClassVar[int]
    FOR_INTERVALS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    COOLDOWN_S_FIELD_NUMBER: _ClassVar[int]
    MAX_PER_DAY_FIELD_NUMBER: _ClassVar[int]
    slowdown: float
    for_intervals: int
    iterations: int
    cooldown_s: int
    max_per_day: int
    def __init__(self, slowdown: _Optional[float] = ..., for_intervals: _Optional[int] = ..., iterations: _Optional[int] = ..., cooldown_s: _Optional[int] = ..., max_per_day: _Optional[int] = ...) -> None: ...

class NameStats(_message.Message):
    __slots__ = ("name", "domain", "count", "total_ns", "mean_ns")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NS_FIELD_NUMBER: _ClassVar[int]
    MEAN_NS_FIELD_NUMBER: _ClassVar[int]
    name: str
    domain: str
    count: int
    total_ns: int
    mean_ns: float
    def __init__(self, name: _Optional[str] = ..., domain: _Optional[str] = ..., count: _Optional[int] = ..., total_ns: _Optional[int] = ..., mean_ns: _Optional[float] = ...) -> None: ...

class KindStats(_message.Message):
    __slots__ = ("kind", "device", "count", "total_ns", "min_ns", "max_ns", "mean_ns", "distinct", "top", "other")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NS_FIELD_NUMBER: _ClassVar[int]
    MIN_NS_FIELD_NUMBER: _ClassVar[int]
    MAX_NS_FIELD_NUMBER: _ClassVar[int]
    MEAN_NS_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    kind: str
    device: int
    count: int
    total_ns: int
    min_ns: int
    max_ns: int
    mean_ns: float
    distinct: int
    top: _containers.RepeatedCompositeFieldContainer[NameStats]
    other: NameStats
    def __init__(self, kind: _Optional[str] = ..., device: _Optional[int] = ..., count: _Optional[int] = ..., total_ns: _Optional[int] = ..., min_ns: _Optional[int] = ..., max_ns: _Optional[int] = ..., mean_ns: _Optional[float] = ..., distinct: _Optional[int] = ..., top: _Optional[_Iterable[_Union[NameStats, _Mapping]]] = ..., other: _Optional[_Union[NameStats, _Mapping]] = ...) -> None: ...

class MetricsReport(_message.Message):
    __slots__ = ("hostname", "pid", "host_pid", "rank", "job_id", "seq", "backend", "start_ns", "end_ns", "sampled_ns", "kinds", "dropped", "unavailable", "final")
    class DroppedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class UnavailableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_PID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    START_NS_FIELD_NUMBER: _ClassVar[int]
    END_NS_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_NS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    pid: int
    host_pid: int
    rank: int
    job_id: int
    seq: int
    backend: str
    start_ns: int
    end_ns: int
    sampled_ns: int
    kinds: _containers.RepeatedCompositeFieldContainer[KindStats]
    dropped: _containers.ScalarMap[str, int]
    unavailable: _containers.ScalarMap[str, str]
    final: bool
    def __init__(self, hostname: _Optional[str] = ..., pid: _Optional[int] = ..., host_pid: _Optional[int] = ..., rank: _Optional[int] = ..., job_id: _Optional[int] = ..., seq: _Optional[int] = ..., backend: _Optional[str] = ..., start_ns: _Optional[int] = ..., end_ns: _Optional[int] = ..., sampled_ns: _Optional[int] = ..., kinds: _Optional[_Iterable[_Union[KindStats, _Mapping]]] = ..., dropped: _Optional[_Mapping[str, int]] = ..., unavailable: _Optional[_Mapping[str, str]] = ..., final: bool = ...) -> None: ...

class WatchMetricsRequest(_message.Message):
    __slots__ = ("targets", "latest")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    LATEST_FIELD_NUMBER: _ClassVar[int]
    targets: Targets
    latest: bool
    def __init__(self, targets: _Optional[_Union[Targets, _Mapping]] = ..., latest: bool = ...) -> None: ...

class FetchMonitorFilesRequest(_message.Message):
    __slots__ = ("targets",)
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    targets: Targets
    def __init__(self, targets: _Optional[_Union[Targets, _Mapping]] = ...) -> None: ...

class DynamicOptions(_message.Message):
    __slots__ = ("activities", "record_shapes", "profile_memory", "with_stack", "with_modules", "task_time", "runtime_api", "aicpu", "model_execution", "hccl", "msproftx", "ascendcl", "aic_metrics", "l2", "sys_hardware_mem", "host_sys", "export_type")
    ACTIVITIES_FIELD_NUMBER: _ClassVar[int]
    RECORD_SHAPES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_MEMORY_FIELD_NUMBER: _ClassVar[int]
    WITH_STACK_FIELD_NUMBER: _ClassVar[int]
    WITH_MODULES_FIELD_NUMBER: _ClassVar[int]
    TASK_TIME_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_API_FIELD_NUMBER: _ClassVar[int]
    AICPU_FIELD_NUMBER: _ClassVar[int]
    MODEL_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    HCCL_FIELD_NUMBER: _ClassVar[int]
    MSPROFTX_FIELD_NUMBER: _ClassVar[int]
    ASCENDCL_FIELD_NUMBER: _ClassVar[int]
    AIC_METRICS_FIELD_NUMBER: _ClassVar[int]
    L2_FIELD_NUMBER: _ClassVar[int]
    SYS_HARDWARE_MEM_FIELD_NUMBER: _ClassVar[int]
    HOST_SYS_FIELD_NUMBER: _ClassVar[int]
    EXPORT_TYPE_FIELD_NUMBER: _ClassVar[int]
    activities: _containers.RepeatedScalarFieldContainer[str]
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    with_modules: bool
    task_time: str
    runtime_api: bool
    aicpu: bool
    model_execution: bool
    hccl: bool
    msproftx: bool
    ascendcl: bool
    aic_metrics: str
    l2: bool
    sys_hardware_mem: bool
    host_sys: _containers.RepeatedScalarFieldContainer[str]
    export_type: str
    def __init__(self, activities: _Optional[_Iterable[str]] = ..., record_shapes: bool = ..., profile_memory: bool = ..., with_stack: bool = ..., with_modules: bool = ..., task_time: _Optional[str] = ..., runtime_api: bool = ..., aicpu: bool = ..., model_execution: bool = ..., hccl: bool = ..., msproftx: bool = ..., ascendcl: bool = ..., aic_metrics: _Optional[str] = ..., l2: bool = ..., sys_hardware_mem: bool = ..., host_sys: _Optional[_Iterable[str]] = ..., export_type: _Optional[str] = ...) -> None: ...

class DynamicClient(_message.Message):
    __slots__ = ("user", "uid", "hostname", "pid")
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    user: str
    uid: int
    hostname: str
    pid: int
    def __init__(self, user: _Optional[str] = ..., uid: _Optional[int] = ..., hostname: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class DynamicAttach(_message.Message):
    __slots__ = ("targets", "output", "options", "idle_timeout_s", "command_limit", "wait_registration_s", "client")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    COMMAND_LIMIT_FIELD_NUMBER: _ClassVar[int]
    WAIT_REGISTRATION_S_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    targets: Targets
    output: str
    options: DynamicOptions
    idle_timeout_s: float
    command_limit: int
    wait_registration_s: float
    client: DynamicClient
    def __init__(self, targets: _Optional[_Union[Targets, _Mapping]] = ..., output: _Optional[str] = ..., options: _Optional[_Union[DynamicOptions, _Mapping]] = ..., idle_timeout_s: _Optional[float] = ..., command_limit: _Optional[int] = ..., wait_registration_s: _Optional[float] = ..., client: _Optional[_Union[DynamicClient, _Mapping]] = ...) -> None: ...

class DynamicRequest(_message.Message):
    __slots__ = ("seq", "action", "attach")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    seq: int
    action: DynamicAction
    attach: DynamicAttach
    def __init__(self, seq: _Optional[int] = ..., action: _Optional[_Union[DynamicAction, str]] = ..., attach: _Optional[_Union[DynamicAttach, _Mapping]] = ...) -> None: ...

class DynamicProcess(_message.Message):
    __slots__ = ("pid", "host_pid", "rank", "ok", "detail", "window", "size_bytes", "step", "backend", "new_warnings", "collecting_s")
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_PID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    NEW_WARNINGS_FIELD_NUMBER: _ClassVar[int]
    COLLECTING_S_FIELD_NUMBER: _ClassVar[int]
    pid: int
    host_pid: int
    rank: int
    ok: bool
    detail: str
    window: TraceProcess
    size_bytes: int
    step: int
    backend: str
    new_warnings: _containers.RepeatedScalarFieldContainer[str]
    collecting_s: float
    def __init__(self, pid: _Optional[int] = ..., host_pid: _Optional[int] = ..., rank: _Optional[int] = ..., ok: bool = ..., detail: _Optional[str] = ..., window: _Optional[_Union[TraceProcess, _Mapping]] = ..., size_bytes: _Optional[int] = ..., step: _Optional[int] = ..., backend: _Optional[str] = ..., new_warnings: _Optional[_Iterable[str]] = ..., collecting_s: _Optional[float] = ...) -> None: ...

class SessionPart(_message.Message):
    __slots__ = ("news", "processes", "label", "refusal", "why", "window_id", "output", "hostname", "attached", "commands_used", "command_limit", "windows", "idle_left_s", "idle_timeout_s", "waited_s")
    NEWS_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    WINDOW_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ATTACHED_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_USED_FIELD_NUMBER: _ClassVar[int]
    COMMAND_LIMIT_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    IDLE_LEFT_S_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    WAITED_S_FIELD_NUMBER: _ClassVar[int]
    news: SessionNews
    processes: _containers.RepeatedCompositeFieldContainer[DynamicProcess]
    label: str
    refusal: str
    why: str
    window_id: str
    output: str
    hostname: str
    attached: int
    commands_used: int
    command_limit: int
    windows: int
    idle_left_s: float
    idle_timeout_s: float
    waited_s: float
    def __init__(self, news: _Optional[_Union[SessionNews, str]] = ..., processes: _Optional[_Iterable[_Union[DynamicProcess, _Mapping]]] = ..., label: _Optional[str] = ..., refusal: _Optional[str] = ..., why: _Optional[str] = ..., window_id: _Optional[str] = ..., output: _Optional[str] = ..., hostname: _Optional[str] = ..., attached: _Optional[int] = ..., commands_used: _Optional[int] = ..., command_limit: _Optional[int] = ..., windows: _Optional[int] = ..., idle_left_s: _Optional[float] = ..., idle_timeout_s: _Optional[float] = ..., waited_s: _Optional[float] = ...) -> None: ...

class DynamicReply(_message.Message):
    __slots__ = ("seq", "action", "ok", "message", "processes", "window_id", "ended", "commands_left", "parts")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_ID_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_LEFT_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    seq: int
    action: DynamicAction
    ok: bool
    message: str
    processes: _containers.RepeatedCompositeFieldContainer[DynamicProcess]
    window_id: str
    ended: bool
    commands_left: int
    parts: _containers.RepeatedCompositeFieldContainer[SessionPart]
    def __init__(self, seq: _Optional[int] = ..., action: _Optional[_Union[DynamicAction, str]] = ..., ok: bool = ..., message: _Optional[str] = ..., processes: _Optional[_Iterable[_Union[DynamicProcess, _Mapping]]] = ..., window_id: _Optional[str] = ..., ended: bool = ..., commands_left: _Optional[int] = ..., parts: _Optional[_Iterable[_Union[SessionPart, _Mapping]]] = ...) -> None: ...

class ListIncidentsRequest(_message.Message):
    __slots__ = ("job_id", "limit")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    limit: int
    def __init__(self, job_id: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class NameFigure(_message.Message):
    __slots__ = ("name", "baseline_ns", "current_ns")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BASELINE_NS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_NS_FIELD_NUMBER: _ClassVar[int]
    name: str
    baseline_ns: float
    current_ns: float
    def __init__(self, name: _Optional[str] = ..., baseline_ns: _Optional[float] = ..., current_ns: _Optional[float] = ...) -> None: ...

class IncidentEvent(_message.Message):
    __slots__ = ("at", "what")
    AT_FIELD_NUMBER: _ClassVar[int]
    WHAT_FIELD_NUMBER: _ClassVar[int]
    at: float
    what: str
    def __init__(self, at: _Optional[float] = ..., what: _Optional[str] = ...) -> None: ...

class IncidentInfo(_message.Message):
    __slots__ = ("id", "at", "hostname", "job_id", "rank", "pid", "host_pid", "kind", "device", "name", "detection", "baseline_ns", "current_ns", "intervals", "report_seq", "traced", "action", "trace_id", "trace_files", "figures", "timeline")
    ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_PID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DETECTION_FIELD_NUMBER: _ClassVar[int]
    BASELINE_NS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_NS_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    REPORT_SEQ_FIELD_NUMBER: _ClassVar[int]
    TRACED_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_FILES_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    id: int
    at: float
    hostname: str
    job_id: int
    rank: int
    pid: int
    host_pid: int
    kind: str
    device: int
    name: str
    detection: str
    baseline_ns: float
    current_ns: float
    intervals: int
    report_seq: int
    traced: bool
    action: str
    trace_id: str
    trace_files: _containers.RepeatedScalarFieldContainer[str]
    figures: _containers.RepeatedCompositeFieldContainer[NameFigure]
    timeline: _containers.RepeatedCompositeFieldContainer[IncidentEvent]
    def __init__(self, id: _Optional[int] = ..., at: _Optional[float] = ..., hostname: _Optional[str] = ..., job_id: _Optional[int] = ..., rank: _Optional[int] = ..., pid: _Optional[int] = ..., host_pid: _Optional[int] = ..., kind: _Optional[str] = ..., device: _Optional[int] = ..., name: _Optional[str] = ..., detection: _Optional[str] = ..., baseline_ns: _Optional[float] = ..., current_ns: _Optional[float] = ..., intervals: _Optional[int] = ..., report_seq: _Optional[int] = ..., traced: bool = ..., action: _Optional[str] = ..., trace_id: _Optional[str] = ..., trace_files: _Optional[_Iterable[str]] = ..., figures: _Optional[_Iterable[_Union[NameFigure, _Mapping]]] = ..., timeline: _Optional[_Iterable[_Union[IncidentEvent, _Mapping]]] = ...) -> None: ...

class ListIncidentsResponse(_message.Message):
    __slots__ = ("incidents",)
    INCIDENTS_FIELD_NUMBER: _ClassVar[int]
    incidents: _containers.RepeatedCompositeFieldContainer[IncidentInfo]
    def __init__(self, incidents: _Optional[_Iterable[_Union[IncidentInfo, _Mapping]]] = ...) -> None: ...

class GetIncidentRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...
