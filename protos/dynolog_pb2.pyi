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
CLIENT_KIND_UNSPECIFIED: ClientKind
CLIENT_KIND_PLUGIN: ClientKind
CLIENT_KIND_KINETO: ClientKind
TRACE_STATE_UNINITIALIZED: TraceState
TRACE_STATE_IDLE: TraceState
TRACE_STATE_READY: TraceState
TRACE_STATE_RUNNING: TraceState
MONITOR_STATE_UNINITIALIZED: MonitorState
MONITOR_STATE_IDLE: MonitorState
MONITOR_STATE_RUNNING: MonitorState

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IpcCounters(_message.Message):
    __slots__ = ("received", "replied", "malformed", "rejected_senders", "send_errors")
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    REPLIED_FIELD_NUMBER: _ClassVar[int]
    MALFORMED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_SENDERS_FIELD_NUMBER: _ClassVar[int]
    SEND_ERRORS_FIELD_NUMBER: _ClassVar[int]
    received: int
    replied: int
    malformed: int
    rejected_senders: int
    send_errors: int
    def __init__(self, received: _Optional[int] = ..., replied: _Optional[int] = ..., malformed: _Optional[int] = ..., rejected_senders: _Optional[int] = ..., send_errors: _Optional[int] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("hostname", "version", "pid", "uptime_s", "ipc_enabled", "ipc_addresses", "processes", "plugin_processes", "kineto_processes", "ipc", "tls")
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
    def __init__(self, hostname: _Optional[str] = ..., version: _Optional[str] = ..., pid: _Optional[int] = ..., uptime_s: _Optional[float] = ..., ipc_enabled: _Optional[bool] = ..., ipc_addresses: _Optional[_Iterable[str]] = ..., processes: _Optional[int] = ..., plugin_processes: _Optional[int] = ..., kineto_processes: _Optional[int] = ..., ipc: _Optional[_Union[IpcCounters, _Mapping]] = ..., tls: _Optional[bool] = ...) -> None: ...

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
    __slots__ = ("pid", "host_pid", "ancestors", "job_id", "rank", "local_rank", "world_size", "devices", "backend", "clients", "hostname", "versions", "plugin_version", "capabilities", "registered_at", "last_seen_s", "uid", "current_step", "trace_state", "monitor_state")
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
    def __init__(self, pid: _Optional[int] = ..., host_pid: _Optional[int] = ..., ancestors: _Optional[_Iterable[int]] = ..., job_id: _Optional[int] = ..., rank: _Optional[int] = ..., local_rank: _Optional[int] = ..., world_size: _Optional[int] = ..., devices: _Optional[_Iterable[int]] = ..., backend: _Optional[str] = ..., clients: _Optional[_Iterable[_Union[ClientKind, str]]] = ..., hostname: _Optional[str] = ..., versions: _Optional[_Mapping[str, str]] = ..., plugin_version: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., registered_at: _Optional[float] = ..., last_seen_s: _Optional[float] = ..., uid: _Optional[int] = ..., current_step: _Optional[int] = ..., trace_state: _Optional[_Union[TraceState, str]] = ..., monitor_state: _Optional[_Union[MonitorState, str]] = ...) -> None: ...

class ListProcessesRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class ListProcessesResponse(_message.Message):
    __slots__ = ("processes",)
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    def __init__(self, processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ...) -> None: ...
