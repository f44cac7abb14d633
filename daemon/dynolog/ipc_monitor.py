"""What the daemon does with each IPC message: checks the sender, parses, updates the registry, replies."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from msmonitor_plugin import wire

from . import __version__
from .ipc import MSMONITOR, IpcCounters, IpcEndpoint, Sender
from .monitoring import MonitorManager
from .registry import ClientKind, ProcessRecord, Registry
from .sinks import Sinks
from .tracing import TraceManager

log = logging.getLogger("dynolog.ipc")


class IpcMonitor:
    def __init__(
        self, registry: Registry, allowed_uids: Sequence[int], sinks: Optional[Sinks] = None
    ) -> None:
        self.registry = registry
        self.counters = IpcCounters()
        self.endpoints: List[IpcEndpoint] = []
        self.traces = TraceManager(registry, self._push)
        self.monitors = MonitorManager(registry, self._push, sinks)
        self._allowed_uids = frozenset(allowed_uids)
        # The endpoint each plugin process talks through: pushes must leave by the same socket.
        self._plugin_endpoints: Dict[int, IpcEndpoint] = {}
        self._handlers: Dict[str, Callable[[IpcEndpoint, wire.Datagram, Sender], None]] = {
            wire.REQ: self._on_kineto_request,
            wire.CTXT: self._on_context,
            wire.HELLO: self._on_hello,
            wire.EVENT: self._on_event,
            wire.NPU_TRACE_STATUS: self._on_npu_status,
            wire.NPU_MONITOR_STATUS: self._on_npu_status,
            wire.BYE: self._on_bye,
            wire.MONITOR: self._on_monitor,
            wire.METRICS: self._on_metrics,
            wire.DATA: self._on_data,
        }
        self._expiry: Optional[asyncio.TimerHandle] = None

    def open(self, loop: asyncio.AbstractEventLoop, addresses: Sequence[Tuple[wire.Address, str]]) -> None:
        """Serve each (address, flavour): dynolog's own address, and msMonitor's sockets when configured."""
        for address, flavour in addresses:
            endpoint = IpcEndpoint(address, self.dispatch, self.counters, flavour)
            endpoint.open(loop)
            self.endpoints.append(endpoint)
        self._schedule_expiry(loop)

    def close(self) -> None:
        self.monitors.close()
        if self._expiry is not None:
            self._expiry.cancel()
        for endpoint in self.endpoints:
            endpoint.close()
        self.endpoints.clear()

    def dispatch(self, endpoint: IpcEndpoint, data: bytes, sender: Sender) -> None:
        if sender.uid not in self._allowed_uids:
            self.counters.rejected_senders += 1
            return
        try:
            datagram = wire.decode(data)
            handler = self._handlers.get(datagram.type)
            if handler is None:
                raise wire.WireError(f"unknown message type {datagram.type!r}")
            handler(endpoint, datagram, sender)
        except wire.WireError as exc:
            self.counters.malformed += 1
            log.debug("dropped a datagram from pid %d: %s", sender.pid, exc)

    def _on_kineto_request(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        request = wire.KinetoRequest.unpack(datagram.payload)
        new = self.registry.get(sender.pid) is None
        record = self.registry.poll(
            sender.pid, sender.uid, request, sender.address, self._poller_kind(endpoint, sender)
        )
        if new:
            _log_registered(record)
        reply = self.traces.poll(record, request.config_type)
        endpoint.send(wire.encode(wire.REQ, reply), sender.address)

    def _on_context(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        new = self.registry.get(sender.pid) is None
        count = self.registry.context(
            sender.pid, sender.uid, wire.KinetoContext.unpack(datagram.payload), sender.address
        )
        record = self.registry.get(sender.pid)
        if new and record is not None:
            _log_registered(record)
        endpoint.send(wire.encode(wire.CTXT, wire.pack_context_reply(count)), sender.address)

    def _on_hello(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        hello = wire.Hello.from_payload(datagram.payload)
        new = self.registry.get(sender.pid) is None
        record = self.registry.plugin_hello(sender.pid, sender.uid, hello, sender.address)
        self._plugin_endpoints[sender.pid] = endpoint
        if new:
            _log_registered(record)
        ack = wire.Ack(keepalive_s=self.registry.keepalive_s, daemon_version=__version__)
        endpoint.send(wire.encode(wire.ACK, ack.to_payload()), sender.address)
        self.traces.plugin_hello(record, hello)

    def _on_event(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        self.traces.event(self._registered(sender, datagram), wire.TraceEvent.from_payload(datagram.payload))

    def _on_monitor(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        self.monitors.monitor_event(
            self._registered(sender, datagram), wire.MonitorEvent.from_payload(datagram.payload)
        )

    def _on_metrics(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        self.monitors.metrics_chunk(self._registered(sender, datagram), datagram.payload)

    def _on_data(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        """msMonitor's metric messages, from processes that do not send this project's reports."""
        record = self._registered(sender, datagram)
        if not record.accepts_push:
            self.monitors.data_message(record, datagram.payload)

    def _registered(self, sender: Sender, datagram: wire.Datagram) -> ProcessRecord:
        record = self.registry.get(sender.pid)
        if record is None:
            raise wire.WireError(f"{datagram.type} from unregistered pid {sender.pid}")
        return record

    def _on_npu_status(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        """msMonitor's status structs (torch_npu / MindSpore through IPCMonitor): kept per process."""
        status = wire.NpuStatus.unpack(datagram.payload)
        record = self._registered(sender, datagram)
        self.registry.npu_status(record, datagram.type == wire.NPU_MONITOR_STATUS, status)
        if datagram.type == wire.NPU_TRACE_STATUS:
            self.traces.npu_status(record, status)

    def _on_bye(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        wire.Bye.from_payload(datagram.payload)
        record = self.registry.get(sender.pid)
        if record is None:
            return
        log.info("process %d left", sender.pid)
        self.traces.process_gone(record, "exited")
        self.monitors.forget(record)
        self._plugin_endpoints.pop(sender.pid, None)
        self.registry.plugin_bye(sender.pid)

    def _poller_kind(self, endpoint: IpcEndpoint, sender: Sender) -> ClientKind:
        """A ``req`` on msMonitor's socket, or from a process that sent ``ctxt``, is msMonitor's client."""
        record = self.registry.get(sender.pid)
        if endpoint.flavour == MSMONITOR or (record is not None and ClientKind.MSMONITOR in record.clients):
            return ClientKind.MSMONITOR
        return ClientKind.KINETO

    def _push(self, record: ProcessRecord, data: bytes) -> bool:
        endpoint = self._plugin_endpoints.get(record.host_pid)
        address = record.addresses.get(ClientKind.PLUGIN)
        return endpoint is not None and address is not None and endpoint.send(data, address)

    def _schedule_expiry(self, loop: asyncio.AbstractEventLoop) -> None:
        # Sweep four times per keep-alive (at least every 5 s, which also notices exited processes).
        interval = min(self.registry.keepalive_s / 4, 5.0)

        def sweep() -> None:
            for record in self.registry.expire():
                log.info("forgot process %d (job %d, rank %d)", record.host_pid, record.job_id, record.rank)
                self.traces.process_gone(record, "exited or stopped responding")
                self.monitors.forget(record)
                self._plugin_endpoints.pop(record.host_pid, None)
            self._expiry = loop.call_later(interval, sweep)

        self._expiry = loop.call_later(interval, sweep)


def _log_registered(record: ProcessRecord) -> None:
    log.info(
        "registered process %d (%s, job %d, rank %d)",
        record.host_pid,
        "+".join(sorted(kind.value for kind in record.clients)),
        record.job_id,
        record.rank,
    )
