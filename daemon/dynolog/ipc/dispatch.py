"""Each IPC datagram to what handles it: the sender is checked, the message parsed, and passed on to the
registry and the adapter of the client that sent it; replies leave through the same endpoint."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from msmonitor_contract import wire

from .. import __version__
from ..core import descriptors
from ..core.registry import ClientKind, ProcessRecord
from ..node import Node
from .cap import DEFAULT_MAX_CLIENTS, RegistrationCap
from .clients import polling
from .endpoint import MSMONITOR, IpcCounters, IpcEndpoint, Sender
from .pidwatch import PidWatch

log = logging.getLogger("dynolog.ipc.endpoint")

Handler = Callable[[IpcEndpoint, wire.Datagram, Sender], None]


class IpcDispatcher:
    def __init__(
        self,
        node: Node,
        allowed_uids: Sequence[int],
        trace_roots: Sequence[str] = (),
        max_clients: int = DEFAULT_MAX_CLIENTS,
    ) -> None:
        self.node = node
        self.cap = RegistrationCap(max_clients, len(frozenset(allowed_uids)))
        self._trace_roots = tuple(trace_roots)  # told to each plugin: it confines its writes to them
        self.counters = IpcCounters()
        self.endpoints: List[IpcEndpoint] = []
        self._allowed_uids = frozenset(allowed_uids)
        self._handlers: Dict[str, Handler] = {
            wire.REQ: self._on_request,
            wire.CTXT: self._on_context,
            wire.HELLO: self._on_hello,
            wire.EVENT: self._on_event,
            wire.NPU_TRACE_STATUS: self._on_npu_status,
            wire.NPU_MONITOR_STATUS: self._on_npu_status,
            wire.BYE: self._on_bye,
            wire.MONITOR: self._on_monitor,
            wire.METRICS: self._on_metrics,
            wire.DATA: self._on_data,
            wire.STEP: self._on_step,
        }
        self._expiry: Optional[asyncio.TimerHandle] = None
        self._pidwatch: Optional[PidWatch] = None  # each registered process's exit, learnt as it happens

    def open(self, loop: asyncio.AbstractEventLoop, addresses: Sequence[Tuple[wire.Address, str]]) -> None:
        """Serve each (address, flavour): dynolog's own address, and msMonitor's sockets when configured."""
        for address, flavour in addresses:
            endpoint = IpcEndpoint(address, self.dispatch, self.counters, flavour)
            endpoint.open(loop)
            self.endpoints.append(endpoint)
        # Measured once the IPC sockets are open; what else the daemon opens comes out of the reserve.
        self._pidwatch = PidWatch(loop, self._exited, descriptors.share())
        self._schedule_expiry(loop)

    def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        if self._pidwatch is not None:
            self._pidwatch.close()
        for endpoint in self.endpoints:
            endpoint.close()
        self.endpoints.clear()

    def dispatch(self, endpoint: IpcEndpoint, data: bytes, sender: Sender) -> None:
        if sender.uid not in self._allowed_uids or self.node.registry.is_orphan(sender.pid):
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
        else:
            self.counters.handled += 1

    # --- registration and polls -------------------------------------------------------------------

    def _on_request(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        request = wire.KinetoRequest.unpack(datagram.payload)
        kind = self._poller_kind(endpoint, sender)
        record = self._register(
            sender,
            lambda: polling.register(self.node.registry, sender, request, kind),
        )
        if record is None:
            return
        if kind is ClientKind.MSMONITOR:
            reply = self.node.msmonitor.poll(record)  # staged only for what the plugin leaves to it
        elif record.accepts_push:
            reply = b""  # the plugin in the same process takes gputrace by push: one delivery only
        else:
            reply = self.node.kineto.poll(record, request.config_type)
        endpoint.send(wire.encode(wire.REQ, reply), sender.address)

    def _on_context(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        context = wire.KinetoContext.unpack(datagram.payload)
        record = self._register(sender, lambda: self.node.msmonitor.register(sender, context))
        if record is None:
            return
        peers = self.node.registry.peers(record)
        endpoint.send(wire.encode(wire.CTXT, wire.pack_context_reply(peers)), sender.address)

    def _on_hello(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        hello = wire.Hello.from_payload(datagram.payload)
        record = self._register(sender, lambda: self.node.plugin.register(sender, hello))
        if record is None:
            return
        ack = wire.Ack(
            keepalive_s=self.node.registry.keepalive_s,
            daemon_version=__version__,
            trace_roots=list(self._trace_roots),
            step_reports=True,
        )
        endpoint.send(wire.encode(wire.ACK, ack.to_payload()), sender.address)
        if self.node.registry.is_helper(sender.pid):  # its job's plugin speaks for the process
            return
        self.node.delivery.plugin_seen(sender.pid, endpoint)
        self.node.plugin.hello(record, hello)  # first: it adopts a trace a previous daemon started
        self.node.delivery.heartbeat(record)
        self.node.incidents.hello(record)

    def _on_bye(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        wire.Bye.from_payload(datagram.payload)
        record = self.node.registry.get(sender.pid)
        if record is None or self.node.registry.is_helper(sender.pid):  # a helper leaving is not its job
            return
        log.info("process %d left", sender.pid)
        self.node.process_gone(record, "exited")
        self.node.registry.left(sender.pid, ClientKind.PLUGIN)

    # --- what registered processes report ---------------------------------------------------------

    def _on_event(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        event = wire.TraceEvent.from_payload(datagram.payload)
        self.node.plugin.event(self._registered(sender, datagram), event)

    def _on_monitor(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        event = wire.MonitorEvent.from_payload(datagram.payload)
        self.node.npumonitor.answered(self._registered(sender, datagram), event)

    def _on_step(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        """The step count between heartbeats: `dyno status` and `dyno processes` stay current."""
        step = wire.Step.from_payload(datagram.payload)
        record = self._registered(sender, datagram)
        record.current_step = max(record.current_step, step.step)

    def _on_metrics(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        self.node.metrics.chunk(self._registered(sender, datagram), datagram.payload)

    def _on_data(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        """msMonitor's metric messages, from processes that do not send this project's reports."""
        record = self._registered(sender, datagram)
        if not record.accepts_push:
            self.node.metrics.data_message(record, datagram.payload)

    def _on_npu_status(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        """msMonitor's status structs (torch_npu / MindSpore through IPCMonitor): kept per process."""
        status = wire.NpuStatus.unpack(datagram.payload)
        record = self._registered(sender, datagram)
        if datagram.type == wire.NPU_MONITOR_STATUS:
            self.node.msmonitor.monitor_status(record, status)
        else:
            self.node.msmonitor.trace_status(record, status)

    # --- helpers --------------------------------------------------------------------------------------

    def _register(self, sender: Sender, register: Callable[[], ProcessRecord]) -> Optional[ProcessRecord]:
        """The sender's record, registered now if new; None where --max-ipc-clients refuses it (it is
        sent no reply: no message says refused, and silence is what an absent daemon gives)."""
        registry = self.node.registry
        new = registry.get(sender.pid) is None
        if new and not self.cap.admits(sender, registry.registered, registry.registered_by(sender.uid)):
            return None
        record = register()
        if new:
            if self._pidwatch is not None:
                self._pidwatch.watch(sender.pid)
            log.info(
                "registered process %d (%s, job %d, rank %d)",
                record.host_pid,
                "+".join(sorted(kind.value for kind in record.clients)),
                record.job_id,
                record.rank,
            )
        return record

    def _registered(self, sender: Sender, datagram: wire.Datagram) -> ProcessRecord:
        record = self.node.registry.get(sender.pid)
        if record is None:
            raise wire.WireError(f"{datagram.type} from unregistered pid {sender.pid}")
        # Any message is proof of life: under load a busy socket refuses the heartbeat, which the plugin
        # then retries more slowly than its reports, and a live process must not be forgotten for that.
        record.last_seen = time.monotonic()
        return record

    def _exited(self, host_pid: int) -> None:
        """The kernel said the process exited (SIGKILL and SIGTERM included): forget it once what it
        sent before exiting, still queued on any socket, is handled (its last report, its goodbye)."""
        waiting = set(self.endpoints)

        def flushed(endpoint: IpcEndpoint) -> None:
            waiting.discard(endpoint)
            if not waiting:
                self._forget_exited(host_pid)

        if not waiting:
            self._forget_exited(host_pid)
        for endpoint in self.endpoints:
            endpoint.after_queued(functools.partial(flushed, endpoint))

    def _forget_exited(self, host_pid: int) -> None:
        record = self.node.registry.exited(host_pid)
        if record is not None:
            log.info("process %d exited (job %d, rank %d)", host_pid, record.job_id, record.rank)
            self.node.process_gone(record, "exited")

    def _poller_kind(self, endpoint: IpcEndpoint, sender: Sender) -> ClientKind:
        """A ``req`` on msMonitor's socket, or from a process that sent ``ctxt``, is msMonitor's client."""
        record = self.node.registry.get(sender.pid)
        if endpoint.flavour == MSMONITOR or (record is not None and ClientKind.MSMONITOR in record.clients):
            return ClientKind.MSMONITOR
        return ClientKind.KINETO

    def _schedule_expiry(self, loop: asyncio.AbstractEventLoop) -> None:
        # Sweep four times per keep-alive (at least every 5 s, which also notices exited processes).
        interval = min(self.node.registry.keepalive_s / 4, 5.0)

        def sweep() -> None:
            for endpoint in self.endpoints:  # what processes said while the loop was busy counts first
                endpoint.handle_backlog()
            for record in self.node.registry.expire():
                log.info("forgot process %d (job %d, rank %d)", record.host_pid, record.job_id, record.rank)
                self.node.process_gone(record, "exited or stopped responding")
            self._expiry = loop.call_later(interval, sweep)

        self._expiry = loop.call_later(interval, sweep)
