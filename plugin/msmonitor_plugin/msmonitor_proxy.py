"""``IPCMonitor.PyDynamicMonitorProxy``: the object torch_npu and MindSpore drive when
``MSMONITOR_USE_DAEMON=1``, backed by this plugin.

The frameworks call ``init_dyno`` once in a helper process, then ``poll_dyno`` every second or two and
parse the returned ``KEY=VALUE`` text themselves; each rank calls ``enable_dyno_npu_monitor`` with an
npu-monitor config and reports its trace state through ``update_profiler_status``. On the wire this is
msMonitor's contract (``ctxt``, ``req`` type 3, the status structs) to ``$HOME/dynolog.sock``, so
msMonitor's own daemon serves it too; this project's daemon also receives a richer registration
(rank, job, versions) that msMonitor's daemon ignores.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Dict, Mapping, Optional

import msmonitor_plugin
from msmonitor_contract import pids, wire
from msmonitor_contract.vocabulary import (
    MSMONITOR_SOCKET_DIR_ENV,
    CommandKind,
    MonitorState,
    msmonitor_socket_dir,
)

from . import identity
from .daemon_socket import DaemonSocket
from .kinds import FRAMEWORK_TRACES
from .monitor_handler import MonitorHandler

log = logging.getLogger("msmonitor_plugin")

POLL_WAIT_S = 0.05  # msMonitor waits 5 x 10 ms for the reply; so do the frameworks' callers
POLL_INTERVAL_S = 0.1  # at most ten polls a second, however fast the caller loops
# Each poll refreshes the registration; ctxt and hello again only this often (a restarted daemon
# learns the device and the rank within it). Every poll resending them tripled a poll's cost.
REREGISTER_S = 10.0
# What the framework's helper runs: the traces its own dynamic profiler takes, and npu-monitor.
MSMONITOR_CAPABILITIES = ["msmonitor", *(k.value for k in FRAMEWORK_TRACES), CommandKind.NPUMONITOR.value]
_UNINITIALIZED = -1


def daemon_address(env: Mapping[str, str]) -> str:
    """msMonitor's control socket ``$HOME/dynolog.sock`` (the folder: ``MSMONITOR_IPC_SOCKET_DIR``)."""
    return os.path.join(msmonitor_socket_dir(env), wire.MSMONITOR_CONTROL_SOCKET)


class _Channel(DaemonSocket):
    """The helper process's socket: an abstract ``dynoconfigclient<uuid>`` name, as msMonitor binds; a
    file in ``MSMONITOR_IPC_SOCKET_DIR`` when that is set, so the daemon can answer across network
    namespaces (a training pod without the host's network shares only that folder with it). A send the
    daemon does not take is not an error: the next poll tries again."""

    def __init__(self, env: Mapping[str, str]) -> None:
        name = f"dynoconfigclient{uuid.uuid4()}"
        super().__init__(
            daemon_address(env), wire.endpoint_address(name, env.get(MSMONITOR_SOCKET_DIR_ENV, ""))
        )


class PyDynamicMonitorProxy:
    """A singleton, as msMonitor's: every construction returns the same object."""

    _instance: Optional[PyDynamicMonitorProxy] = None
    _instance_lock = threading.Lock()

    def __new__(cls) -> PyDynamicMonitorProxy:
        with cls._instance_lock:
            if cls._instance is None:
                instance = super().__new__(cls)
                instance._channel = None
                instance._own_monitor = None
                instance._npu_id = -1
                instance._lock = threading.Lock()
                instance._last_poll = 0.0  # monotonic
                instance._registered_at = 0.0  # monotonic
                cls._instance = instance
            return cls._instance

    _channel: Optional[_Channel]
    _own_monitor: Optional[MonitorHandler]
    _last_poll: float
    _registered_at: float
    _npu_id: int
    _lock: threading.Lock

    def init_dyno(self, npu_id: int) -> bool:
        """Register this (helper) process; True once its socket exists, even before a daemon answers:
        later polls register it then, where msMonitor would give up for good."""
        with self._lock:
            try:
                if self._channel is None:
                    self._channel = _Channel(os.environ)
                self._npu_id = int(npu_id)
                self._register()
            except (OSError, ValueError) as exc:
                log.warning("init_dyno(%r) failed: %s", npu_id, exc)
                return False
            self._send_status(wire.NPU_TRACE_STATUS, 0)
            self._send_status(wire.NPU_MONITOR_STATUS, 0)
            return True

    def poll_dyno(self) -> str:
        """The daemon's pending ``KEY=VALUE`` config for this process, or ``""`` (within ~50 ms).

        Paced: a call sooner than :data:`POLL_INTERVAL_S` after the previous one first waits for the rest
        of it. MindSpore's monitor helper polls again at once after an empty answer; msMonitor's own
        daemon answered slowly enough to hide that, this one answers in microseconds, and the helper
        burned 70 % of a core doing nothing.
        """
        wait = self._last_poll + POLL_INTERVAL_S - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._last_poll = time.monotonic()
        with self._lock:
            channel = self._channel
            if channel is None:
                return ""
            try:
                if self._last_poll - self._registered_at >= REREGISTER_S:
                    self._register()
                request = wire.KinetoRequest(3, identity.job_id(os.environ), self._pids())
                if not channel.offer(wire.REQ, request.pack()):
                    return ""
                reply = channel.receive(wire.REQ, POLL_WAIT_S)
            except Exception:  # never into the framework's monitor loop
                log.exception("poll_dyno failed")
                return ""
            return reply.decode(errors="replace") if reply else ""

    def enable_dyno_npu_monitor(self, config_map: Dict[str, str]) -> None:
        """Start, stop or change this process's monitor (msMonitor's npu-monitor keys)."""
        try:
            event = self._monitor().apply("", config_map)
            if not event.error:
                running = event.state == MonitorState.RUNNING
                self._send_status(wire.NPU_MONITOR_STATUS, 1 if running else 0)
        except Exception:  # never into the framework's step
            log.exception("enable_dyno_npu_monitor failed")

    def update_profiler_status(self, status: Dict[str, str]) -> None:
        """The framework's trace state: ``profiler_status`` -1 (Uninitialized), 0 Idle, 1 Running, 2 Ready."""
        try:
            # msMonitor's status struct holds int32s: clamp rather than fail on a long-running job.
            values = {
                k: max(-(2**31), min(2**31 - 1, int(status.get(k, "0"))))
                for k in ("profiler_status", "current_step", "start_step", "stop_step")
            }
            if values["profiler_status"] == _UNINITIALIZED:
                self._send_status(wire.NPU_MONITOR_STATUS, _UNINITIALIZED)
            self._send_status(wire.NPU_TRACE_STATUS, values["profiler_status"], values)
        except Exception:  # never into the framework's step
            log.exception("update_profiler_status(%r) failed", status)

    def finalize_dyno(self) -> None:
        """Stop this process's monitor and leave the daemon."""
        self._monitor().close()
        with self._lock:
            if self._channel is not None:
                self._channel.close()
                self._channel = None

    # --- internals ----------------------------------------------------------------------------------

    def _monitor(self) -> MonitorHandler:
        """The agent's monitor when the agent runs (one monitor per process, whoever commands it);
        else one of our own that reports to msMonitor's data socket."""
        agent = msmonitor_plugin.running_agent()
        if agent is not None:
            return agent.monitor
        if self._own_monitor is None:
            self._own_monitor = MonitorHandler(os.environ)
        return self._own_monitor

    def _register(self) -> None:
        assert self._channel is not None
        self._registered_at = time.monotonic()
        context = wire.KinetoContext(device=self._npu_id, pid=os.getpid(), job_id=identity.job_id(os.environ))
        self._channel.offer(wire.CTXT, context.pack())
        hello = identity.hello(0, MSMONITOR_CAPABILITIES)
        self._channel.offer(wire.HELLO, hello.to_payload())

    @staticmethod
    def _pids() -> tuple:
        pid = os.getpid()
        return (pid, *pids.ancestors(pid))

    def _send_status(self, msg_type: str, value: int, steps: Optional[Dict[str, int]] = None) -> None:
        channel = self._channel
        if channel is None:
            channel = _Channel(os.environ)  # a rank that never called init_dyno still reports its state
            self._channel = channel
        steps = steps or {}
        status = wire.NpuStatus(
            status=value,
            current_step=steps.get("current_step", 0),
            start_step=steps.get("start_step", 0),
            stop_step=steps.get("stop_step", 0),
            pid=os.getpid(),
            job_id=identity.job_id(os.environ),
        )
        channel.offer(msg_type, status.pack())
