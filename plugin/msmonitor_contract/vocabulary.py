"""The words the plugin, the daemon and ``dyno`` share: command kinds, states, phases, reasons, defaults.

Standard library only; the daemon and ``dyno`` import it, and convert to the gRPC enums only at the
gRPC edge. A state or reason is named here once, with its one wording.
"""

from __future__ import annotations

import enum
import os
import re
import time
from typing import List, Mapping, Optional


class CommandKind(str, enum.Enum):
    """What a command asks a process to do (the ``kind`` of an ``mm.command``)."""

    NPUTRACE = "nputrace"
    GPUTRACE = "gputrace"
    NPUMONITOR = "npumonitor"
    DYNAMIC = "dynamic"  # a `dyno dynamic` window: collect from start until stop
    # The service profiler's JSON switch, edited (a command source inside the plugin).
    SERVICE_PROFILER = "service"


# The C++ daemons that speak the legacy JSON RPC, as dyno names them: which command kinds each takes is
# in each kind's declaration (msmonitor_contract.kinds).
MSMONITOR_DAEMON, DYNOLOG_DAEMON = "msMonitor", "dynolog"


# Who holds a process's one profiler, as its plugin names the holder: in refusals, and to the daemon in
# every hello (``Hello.profiler``), so the daemon refuses what the process would.
MONITOR_HOLDER = "npu-monitor"
WINDOW_HOLDER = "a dyno dynamic window"


def trace_holder(kind: CommandKind, trace_id: str) -> str:
    """The holder's name while a trace of *kind* waits for its step or runs: "nputrace <id>", ..."""
    return WINDOW_HOLDER if kind is CommandKind.DYNAMIC else f"{kind.value} {trace_id}"


class TraceState(str, enum.Enum):
    """A process's trace slot, as msMonitor's status structs and ``dyno processes`` show it."""

    UNINITIALIZED = "uninitialized"
    IDLE = "idle"
    READY = "ready"  # a trace waits for its start step or time
    RUNNING = "running"

    @property
    def busy(self) -> bool:
        return self in (TraceState.READY, TraceState.RUNNING)


class MonitorState(str, enum.Enum):
    UNINITIALIZED = "uninitialized"
    IDLE = "idle"
    RUNNING = "running"


class TracePhase(str, enum.Enum):
    """One trace in one process. The plugin reports the last four (``mm.event``); the daemon knows the
    first two itself. FINISHED and FAILED are final."""

    STAGED = "staged"  # waiting for the process to take it (push, or its next poll)
    DELIVERED = "delivered"  # taken by a client that reports nothing back (stock Kineto)
    READY = "ready"  # accepted, waiting for its start step or time
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (TracePhase.FINISHED, TracePhase.FAILED)

    @property
    def order(self) -> int:
        """Where the phase falls in a trace's life; a report of an earlier one than the process is in
        came late and changes nothing. Both final phases come last."""
        life = (TracePhase.STAGED, TracePhase.DELIVERED, TracePhase.READY, TracePhase.RUNNING)
        return life.index(self) if self in life else len(life)

    @classmethod
    def reported(cls, text: str) -> Optional[TracePhase]:
        """A phase as a process reports it (ready, running, finished, failed); None for anything else.

        By value: a str enum hashes by name, so ``{TracePhase.READY: ...}.get("ready")`` finds nothing.
        """
        try:
            phase = cls(text)
        except ValueError:
            return None
        return None if phase in (cls.STAGED, cls.DELIVERED) else phase

    def state(self) -> TraceState:
        """The process's trace slot while its trace is in this phase."""
        return {TracePhase.READY: TraceState.READY, TracePhase.RUNNING: TraceState.RUNNING}.get(
            self, TraceState.IDLE
        )


class ClientKind(enum.Enum):
    """Which client runs in a registered process."""

    PLUGIN = "plugin"  # this project's plugin (mm.hello)
    KINETO = "kineto"  # stock PyTorch: polls with req, runs gputrace configs
    MSMONITOR = "msmonitor"  # msMonitor's contract (ctxt, req, status structs): torch_npu, MindSpore


class CommandStatus(str, enum.Enum):
    """msMonitor's ``commandStatus``: whether any process took a command."""

    EFFECTIVE = "effective"
    INEFFECTIVE = "ineffective"


class DynamicAction(enum.Enum):
    """What a ``dyno dynamic`` client asks of its session."""

    ATTACH = 1
    START = 2
    STOP = 3
    STATUS = 4
    QUIT = 5  # stop collecting if collecting, then end the session


class SessionNews(enum.Enum):
    """What one part of a session's answer says; ``dyno`` words it (the daemon sends what happened)."""

    ATTACHED = 1
    REFUSED = 2
    ALREADY_ATTACHED = 3
    ALREADY_STARTED = 4
    STARTED = 5
    NOT_STARTED = 6
    STOPPED = 7
    STATUS = 8
    QUIT = 9
    IDLE_TIMEOUT = 10
    COMMAND_LIMIT = 11
    PROCESS_GONE = 12
    TASK_ENDED = 13


def enum_prefix(type_name: str) -> str:
    """The prefix of a proto enum's values, from its type's name: TracePhase -> ``TRACE_PHASE_``. An
    enum here has the proto enum's name, its members the values' names without the prefix."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type_name).upper() + "_"


class Reason(enum.Enum):
    """Why a process did not take a command; the value is its one wording."""

    NO_PROCESS_REGISTERED = (
        "no process is registered with this daemon: start jobs with MSMONITOR_USE_DAEMON=1 "
        "(or KINETO_USE_DAEMON=1 for gputrace) and check `dyno processes`"
    )
    NO_PROCESS_MATCHED = "no registered process matches the targets; see `dyno processes`"
    NOT_SUPPORTED = (
        "no client in that process runs this command (stock Kineto runs gputrace only; in torch_npu and "
        "MindSpore jobs their monitor process takes nputrace and npu-monitor)"
    )
    NPU_MONITOR_RUNNING = "npu-monitor is running there (dyno npu-monitor --npu-monitor-stop first)"
    NPU_TRACE_RUNNING = "an nputrace is running (or about to start) there"
    TRACE_BUSY = "a trace is already pending or running there (or an earlier command awaits its next poll)"
    START_STEP_PASSED = "its start step has already begun"
    PROCESS_LIMIT = "beyond --process-limit"
    HELD = "another `dyno dynamic` session controls it"
    FRAMEWORK_CANNOT = "the framework's own profiler there cannot take this trace"
    OUTPUT_MISSING = "its output folder does not exist there, and stock Kineto does not create folders"
    OUTPUT_UNWRITABLE = "its output folder is not writable by the process there"


# --- defaults: one place for what dyno, the daemon and the plugin assume when a value is not given ---

DEFAULT_REPORT_INTERVAL_S = 60
DEFAULT_TOP_N = 10
MAX_TOP_N = 1000
DEFAULT_MONITOR_KINDS = "Marker"
DEFAULT_MONITOR_EXPORT = "DB"
DEFAULT_NPU_ACTIVITIES = "CPU,NPU"
DEFAULT_TRACE_EXPORT = "Text"
DEFAULT_PROFILER_LEVEL = "Level0"
DEFAULT_AIC_METRICS = "AiCoreNone"
DEFAULT_DURATION_MS = 500  # a time-based trace without --duration-ms, as dynolog's dyno
DEFAULT_KINETO_LOG_FILE = "/tmp/libkineto_activities.json"
# KINETO_LOG_LEVEL above Kineto's highest (USDT, 5): it prints a "USDT: … profiler_start" and a
# "… profiler_stop" line on stderr per profiler start and stop unless told so before its first use.
KINETO_QUIET = "6"
# msprof's dynamic-mode limits: the session ends after this long without collecting, or this many
# start/stop commands.
DEFAULT_DYNAMIC_IDLE_TIMEOUT_S = 1800
DEFAULT_DYNAMIC_COMMAND_LIMIT = 100
# gputrace's iteration mode starts at the next multiple of this step (Kineto's
# PROFILE_START_ITERATION_ROUNDUP); 0 on the wire means this.
DEFAULT_START_ITERATION_ROUNDUP = 1
DEFAULT_PORT = 1778  # dynolog's gRPC port, where dyno looks for it without --port

# --- dyno's flags: the one that sets each request field (its path in the request) whose flag is not the
# field's own name with dashes (``targets.job_id``: --job-id). dyno declares those flags with these names
# (dyno.cli.field_flag), and dynoproto.validate names them so in its errors (validate.flag_name).
FLAG_NAMES: Mapping[str, str] = {
    "targets.ranks": "--rank-list",
    "profile_start_time_ms": "--profile-start-time",
    "start": "--npu-monitor-start",
    "stop": "--npu-monitor-stop",
    "duration_s": "--duration",
    "activity_kinds": "--mspti-activity-kind",
    "jsonl_rotate_log_lines": "--json-rotate-log-lines",
    "jsonl_rotate_log_files": "--json-rotate-log-files",
    "options.export_type": "--type",
    "idle_timeout_s": "--idle-timeout",
    "wait_registration_s": "--launch-timeout",
}


def split_list(text: Optional[str]) -> List[str]:
    """A comma list: items trimmed, empty ones and msMonitor's ``None`` (an empty list) dropped."""
    items = (item.strip() for item in (text or "").split(","))
    return [item for item in items if item and item != "None"]


def timestamp(ms: int) -> str:
    """``YYYYMMDDhhmmssmmm`` in local time, as msMonitor and msprof name their output."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms // 1000)) + f"{ms % 1000:03d}"


# npu-monitor's --log-file files as msMonitor names them (monitor/writers.file_name writes them), and as
# msprof-analyze finds one rank's database: groups pid, rank, extension.
MONITOR_FILE = re.compile(r"msmonitor_(\d+)_\d{17}_(-1|\d+)\.(db|jsonl)")


MSMONITOR_SOCKET_DIR_ENV = "MSMONITOR_IPC_SOCKET_DIR"


def msmonitor_socket_dir(env: Mapping[str, str]) -> str:
    """Where msMonitor's ``dynolog.sock`` and ``dynolog_data.sock`` live: ``MSMONITOR_IPC_SOCKET_DIR``,
    else the user's home, for the daemon that serves them and the processes that use them alike."""
    folder = env.get(MSMONITOR_SOCKET_DIR_ENV) or env.get("HOME")
    if folder:
        return folder
    try:
        import pwd  # not on every platform the plugin may be imported on

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        return os.path.expanduser("~")
