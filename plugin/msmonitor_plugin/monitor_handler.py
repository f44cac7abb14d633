"""This process's npu-monitor: one :class:`~.monitor.engine.Monitor`, whoever commands it.

Commands come from the daemon through the agent's router (a push) or from torch_npu / MindSpore through
``IPCMonitor.PyDynamicMonitorProxy.enable_dyno_npu_monitor``. Reports go to this project's daemon as
``mm.metrics`` when the agent's link is attached; otherwise as msMonitor's ``data`` messages to
``dynolog_data.sock``, which msMonitor's own daemon reads too.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Callable, Mapping, Optional

from msmonitor_contract import configtext, wire
from msmonitor_contract.report import Report
from msmonitor_contract.vocabulary import MONITOR_HOLDER, MonitorState, msmonitor_socket_dir

from . import identity
from .daemon_socket import DaemonSocket
from .monitor.config import ConfigError, MonitorConfig
from .monitor.engine import Monitor, backends_at_steps
from .slot import ProfilerSlot
from .steps import AtNextStep

log = logging.getLogger("msmonitor_plugin")

# Sends one message to the daemon over the agent's link, keeping it for later if the daemon is away.
Send = Callable[[str, bytes], None]


class MonitorHandler:
    def __init__(
        self,
        env: Mapping[str, str],
        send: Optional[Send] = None,
        slot: Optional[ProfilerSlot] = None,
        at_next_step: Optional[AtNextStep] = None,
    ) -> None:
        self._env = env
        self._send = send
        self._slot = slot if slot is not None else ProfilerSlot()
        self._monitor = Monitor(
            rank=identity.rank(env),
            on_report=self._on_report,
            on_stopped=self._on_stopped,
            env=env,
            backend_factory=backends_at_steps(at_next_step),
        )
        self._last: Optional[wire.MonitorEvent] = None  # the answer to the last command

    @property
    def state(self) -> MonitorState:
        return self._monitor.state

    def handle(self, command: wire.Command) -> None:
        """An npu-monitor command from the daemon; the answer goes back as ``mm.monitor``. The daemon
        pushes a command again until it has the answer: a repeat is answered, not applied twice."""
        last = self._last
        if last is not None and command.trace_id and command.trace_id == last.command_id:
            self._answer(last)
            return
        try:
            keys = configtext.parse(command.config)
        except configtext.ConfigTextError as exc:
            self._answer(self._refused(command.trace_id, str(exc)))
            return
        self.apply(command.trace_id, keys)

    def apply(self, command_id: str, keys: Mapping[str, str]) -> wire.MonitorEvent:
        """Apply msMonitor's npu-monitor keys; the daemon is told what happened, and so is the caller."""
        try:
            config = MonitorConfig.parse(keys)
        except ConfigError as exc:
            log.warning("npu-monitor config refused: %s", exc)
            return self._answer(self._refused(command_id, str(exc)))
        holder = self._slot.claim(MONITOR_HOLDER) if config.start else None
        if holder is not None:
            return self._answer(
                self._refused(
                    command_id, f"refused: {holder} runs in this process (MSPTI has one subscriber)"
                )
            )
        try:
            result = self._monitor.apply(config)
        except Exception as exc:  # MonitorError, or anything else: the daemon gets an answer either way
            log.exception("npu-monitor command failed")
            self._release_unless_running()
            return self._answer(self._refused(command_id, f"{type(exc).__name__}: {exc}"))
        self._release_unless_running()
        return self._answer(
            wire.MonitorEvent(
                command_id=command_id,
                state=result.state.value,
                backend=result.backend,
                unavailable=dict(result.unavailable),
                warnings=list(result.warnings),
                output=result.output,
            )
        )

    def _release_unless_running(self) -> None:
        if self.state is not MonitorState.RUNNING:
            self._slot.release(MONITOR_HOLDER)

    def close(self) -> None:
        """Stop monitoring, writing what the interval has (file mode) before leaving."""
        self._monitor.close()

    def _refused(self, command_id: str, error: str) -> wire.MonitorEvent:
        return wire.MonitorEvent(command_id=command_id, state=self.state.value, error=error)

    def _answer(self, event: wire.MonitorEvent) -> wire.MonitorEvent:
        if event.command_id:
            self._last = event
        if self._send is not None:
            self._send(wire.MONITOR, event.to_payload())
        return event

    def _on_report(self, report: Report) -> None:
        if self._send is not None:
            for chunk in report.to_chunks():
                self._send(wire.METRICS, chunk)
            return
        self._send_data_messages(report)

    def _on_stopped(self, reason: str) -> None:
        """Tell the daemon the monitor stopped by itself (DURATION), so nputrace is possible again."""
        self._slot.release(MONITOR_HOLDER)
        if reason != "command":  # a command's own answer says so
            self._answer(wire.MonitorEvent(command_id="", state=MonitorState.IDLE.value, reason=reason))

    def _send_data_messages(self, report: Report) -> None:
        address = os.path.join(msmonitor_socket_dir(self._env), wire.MSMONITOR_DATA_SOCKET)
        with DaemonSocket(address) as sock:
            for message in report.data_messages():
                sock.offer(wire.DATA, json.dumps(message).encode())
