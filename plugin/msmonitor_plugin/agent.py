"""The plugin's state in one process: the step counter, the daemon link, the tracer, the framework hooks."""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import os
from typing import TYPE_CHECKING, Hashable, Iterable, List, Mapping, Optional, Tuple

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import CommandKind

from . import identity, torch_hook
from .kinds import FRAMEWORK_TRACES, TRACES
from .link import DaemonLink
from .monitor_handler import MonitorHandler
from .router import CommandRouter
from .slot import ProfilerSlot
from .steps import StepCounter
from .trace.tracer import Tracer

if TYPE_CHECKING:
    from .service_profiler.source import ServiceSource

log = logging.getLogger("msmonitor_plugin")

# The plugin's own log file (MSMONITOR_LOG_PATH) is bounded: it rotates at this size, keeping one older
# file, so a process that runs for months, or a flood of warnings, never fills the job's disk.
LOG_MAX_BYTES = 4 * 1024 * 1024
LOG_BACKUPS = 1


def capabilities(kinds: Iterable[CommandKind], env: Mapping[str, str]) -> List[str]:
    """What this plugin does here: the kinds it routes, and "push" (the daemon may send commands at
    once, without a poll).

    In a torch_npu or MindSpore job run with MSMONITOR_USE_DAEMON, the framework's own dynamic profiler
    takes nputrace (through IPCMonitor: the kinds of FRAMEWORK_TRACES), so the plugin leaves it to that.
    """
    framework_traces = any(identity.imported(name) for name in ("torch_npu", "mindspore"))
    leave = framework_traces and env.get("MSMONITOR_USE_DAEMON", "") not in ("", "0")
    return ["push", *(k.value for k in kinds if not (leave and k in FRAMEWORK_TRACES))]


class Agent:
    def __init__(self, counter: StepCounter, socket_dir: str, env: Mapping[str, str]) -> None:
        self.counter = counter
        self.owner_pid = os.getpid()
        self._env = env
        self.link = DaemonLink(socket_dir, self._hello, self._on_datagram, news=self._news)
        # One profiler per process: every recorder claims this slot before it starts one.
        self.slot = slot = ProfilerSlot()
        self.tracer = Tracer(counter, self._report, slot=slot, roots=lambda: self.link.trace_roots)
        self.monitor = MonitorHandler(env, send=self.link.send_reliably, slot=slot, at_next_step=counter.once)
        self.router = CommandRouter()
        self.router.register((kind.command for kind in TRACES), self.tracer.accept)
        self.router.register((CommandKind.NPUMONITOR,), self.monitor.handle)
        self.service_profiler = _service_source(env, slot, self.router)

    def start(self) -> None:
        self.link.start()
        torch_hook.install(self.counter, self.link.heartbeat_now)
        if self.service_profiler is not None:
            self.service_profiler.start()

    def stop(self) -> None:
        if os.getpid() != self.owner_pid:  # a forked child inherits atexit, not the socket
            return
        self.tracer.abort(f"the process exited at step {self.counter.count}")
        self.monitor.close()
        if self.service_profiler is not None:
            self.service_profiler.stop()
        self.link.stop()

    def _hello(self) -> wire.Hello:
        caps = capabilities(self.router.kinds, self._env)
        return identity.hello(self.counter.count, caps, self._env, self._states())

    def _news(self) -> Tuple[int, Hashable]:
        """What the hello says that can change while the process runs: its step, and its states."""
        return self.counter.count, self._states()

    def _states(self) -> identity.States:
        switch = self.service_profiler.switch.state() if self.service_profiler is not None else ""
        return identity.States(self.tracer.state(), self.monitor.state.value, switch, self.slot.holder or "")

    def _report(self, event: wire.TraceEvent) -> None:
        self.link.send_reliably(wire.EVENT, event.to_payload())

    def _on_datagram(self, datagram: wire.Datagram) -> None:
        if datagram.type != wire.COMMAND:
            log.warning("ignoring a %s message from dynolog", datagram.type)
            return
        self.router.route(wire.Command.from_payload(datagram.payload))


def _service_source(
    env: Mapping[str, str], slot: ProfilerSlot, router: CommandRouter
) -> Optional[ServiceSource]:
    """The service profiler's switch file, when SERVICE_PROF_CONFIG_PATH names one (imported only then)."""
    path = env.get("SERVICE_PROF_CONFIG_PATH", "")
    if not path:
        return None
    from .service_profiler.coexist import mindie_records
    from .service_profiler.source import ServiceSource

    # MindIE's own ms_service_profiler watches the file and records; two switches would write one file
    return None if mindie_records() is not None else ServiceSource(path, env, slot, router)


def socket_dir(env: Mapping[str, str]) -> str:
    """Pathname sockets under this directory instead of abstract names (same variable as Kineto)."""
    return env.get("KINETO_IPC_SOCKET_DIR", "")


def configure_logging(env: Mapping[str, str]) -> None:
    """Log to a file only when asked: the plugin must not write into the training job's output. At most
    ``LOG_MAX_BYTES * (1 + LOG_BACKUPS)`` bytes per process."""
    log.addHandler(logging.NullHandler())
    log_dir = env.get("MSMONITOR_LOG_PATH", "")
    if log_dir:
        try:
            os.makedirs(log_dir, exist_ok=True)
            handler = logging.handlers.RotatingFileHandler(
                os.path.join(log_dir, f"msmonitor_plugin_{os.getpid()}.log"),
                maxBytes=LOG_MAX_BYTES,
                backupCount=LOG_BACKUPS,
            )
        except OSError:
            return
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def start_agent(counter: StepCounter, env: Mapping[str, str]) -> Optional[Agent]:
    """Start the agent; on any failure log it and return None — the process runs on unmonitored."""
    configure_logging(env)
    try:
        agent = Agent(counter, socket_dir(env), env)
        agent.start()
    except Exception:
        log.exception("msmonitor plugin could not start; the process continues without it")
        return None
    atexit.register(agent.stop)
    return agent
