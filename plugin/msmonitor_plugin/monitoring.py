"""This process's npu-monitor: one :class:`~.monitor.engine.Monitor`, whoever commands it.

Commands come from the daemon through the agent (a push) or from torch_npu / MindSpore through
``IPCMonitor.PyDynamicMonitorProxy.enable_dyno_npu_monitor``. Reports go to this project's daemon as
``mm.metrics`` when the agent runs; otherwise as msMonitor's ``data`` messages to
``$HOME/dynolog_data.sock``, which msMonitor's own daemon reads too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
from typing import Callable, Mapping, Optional

from . import identity, wire
from .monitor.config import ConfigError, MonitorConfig, parse_text
from .monitor.engine import Monitor, MonitorState
from .monitor.report import Report

log = logging.getLogger("msmonitor_plugin")

NPUMONITOR = wire.NPUMONITOR

# Sends one message to the daemon over the agent's link, keeping it for later if the daemon is away.
Send = Callable[[str, bytes], None]

_lock = threading.Lock()
_monitor: Optional[Monitor] = None
_send: Optional[Send] = None


def attach(send: Send) -> None:
    """The agent's link: from now on reports and state changes go through it."""
    global _send
    _send = send


def apply_text(command_id: str, text: str) -> wire.MonitorEvent:
    """An npu-monitor command from the daemon; returns the event that answers it."""
    try:
        return _apply(command_id, MonitorConfig.parse(parse_text(text)))
    except ConfigError as exc:
        return wire.MonitorEvent(command_id=command_id, state=_state(), error=str(exc))


def apply_mapping(mapping: Mapping[str, str]) -> Optional[bool]:
    """A command from torch_npu / MindSpore; True when monitoring afterwards, None when it was refused."""
    try:
        event = _apply("", MonitorConfig.parse(mapping))
    except ConfigError as exc:
        log.warning("npu-monitor config refused: %s", exc)
        return None
    if _send is not None:
        _send(wire.MONITOR, event.to_payload())
    return None if event.error else event.state == wire.MONITOR_RUNNING


def state() -> str:
    return _state()


def shutdown() -> None:
    """Stop monitoring at process exit, writing what the interval has (file mode) before leaving."""
    monitor = _monitor
    if monitor is not None:
        monitor.close()


def _apply(command_id: str, config: MonitorConfig) -> wire.MonitorEvent:
    monitor = _get()
    try:
        result = monitor.apply(config)
    except Exception as exc:  # MonitorError, or anything else: the daemon gets an answer either way
        log.exception("npu-monitor command failed")
        return wire.MonitorEvent(command_id=command_id, state=_state(), error=f"{type(exc).__name__}: {exc}")
    return wire.MonitorEvent(
        command_id=command_id,
        state=wire.MONITOR_RUNNING if result.state is MonitorState.RUNNING else wire.MONITOR_IDLE,
        backend=result.backend,
        unavailable=dict(result.unavailable),
        warnings=list(result.warnings),
        output=result.output,
    )


def _state() -> str:
    monitor = _monitor
    running = monitor is not None and monitor.state is MonitorState.RUNNING
    return wire.MONITOR_RUNNING if running else wire.MONITOR_IDLE


def _get() -> Monitor:
    global _monitor
    with _lock:
        if _monitor is None:
            env = os.environ
            _monitor = Monitor(rank=identity.rank(env), on_report=_on_report, on_stopped=_on_stopped, env=env)
        return _monitor


def _on_report(report: Report) -> None:
    send = _send
    if send is not None:
        for chunk in report.to_chunks():
            send(wire.METRICS, chunk)
        return
    _send_data_messages(report)


def _on_stopped(reason: str) -> None:
    """Tell the daemon the monitor stopped by itself (DURATION), so nputrace is possible again."""
    if reason == "command":
        return  # the command's own answer says so
    event = wire.MonitorEvent(command_id="", state=wire.MONITOR_IDLE, reason=reason)
    send = _send
    if send is not None:
        send(wire.MONITOR, event.to_payload())


def _send_data_messages(report: Report) -> None:
    folder = os.environ.get("MSMONITOR_IPC_SOCKET_DIR") or os.path.expanduser("~")
    address = os.path.join(folder, wire.MSMONITOR_DATA_SOCKET)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        for message in report.data_messages():
            with contextlib.suppress(OSError):
                sock.sendto(wire.encode(wire.DATA, json.dumps(message).encode()), address)
