"""What the daemon does with each IPC message: checks the sender, parses, updates the registry, replies."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Dict, List, Optional, Sequence

from msmonitor_plugin import wire

from . import __version__
from .ipc import IpcCounters, IpcEndpoint, Sender
from .registry import ProcessRecord, Registry

log = logging.getLogger("dynolog.ipc")


class IpcMonitor:
    def __init__(self, registry: Registry, allowed_uids: Sequence[int]) -> None:
        self.registry = registry
        self.counters = IpcCounters()
        self.endpoints: List[IpcEndpoint] = []
        self._allowed_uids = frozenset(allowed_uids)
        self._handlers: Dict[str, Callable[[IpcEndpoint, wire.Datagram, Sender], None]] = {
            wire.REQ: self._on_kineto_request,
            wire.CTXT: self._on_context,
            wire.HELLO: self._on_hello,
            wire.BYE: self._on_bye,
        }
        self._expiry: Optional[asyncio.TimerHandle] = None

    def open(self, loop: asyncio.AbstractEventLoop, addresses: Sequence[wire.Address]) -> None:
        for address in addresses:
            endpoint = IpcEndpoint(address, self.dispatch, self.counters)
            endpoint.open(loop)
            self.endpoints.append(endpoint)
        self._schedule_expiry(loop)

    def close(self) -> None:
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
        record = self.registry.kineto_poll(sender.pid, sender.uid, request, sender.address)
        if new:
            _log_registered(record)
        endpoint.send(wire.encode(wire.REQ, b""), sender.address)

    def _on_context(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        count = self.registry.context(sender.pid, wire.KinetoContext.unpack(datagram.payload))
        endpoint.send(wire.encode(wire.CTXT, wire.pack_context_reply(count)), sender.address)

    def _on_hello(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        hello = wire.Hello.from_payload(datagram.payload)
        new = self.registry.get(sender.pid) is None
        record = self.registry.plugin_hello(sender.pid, sender.uid, hello, sender.address)
        if new:
            _log_registered(record)
        ack = wire.Ack(keepalive_s=self.registry.keepalive_s, daemon_version=__version__)
        endpoint.send(wire.encode(wire.ACK, ack.to_payload()), sender.address)

    def _on_bye(self, endpoint: IpcEndpoint, datagram: wire.Datagram, sender: Sender) -> None:
        wire.Bye.from_payload(datagram.payload)
        if self.registry.get(sender.pid) is not None:
            log.info("process %d left", sender.pid)
        self.registry.plugin_bye(sender.pid)

    def _schedule_expiry(self, loop: asyncio.AbstractEventLoop) -> None:
        # Sweep four times per keep-alive: a silent process is gone within 1.25 keep-alives.
        def sweep() -> None:
            for record in self.registry.expire():
                log.info(
                    "forgot process %d (job %d, rank %d): silent for over %.0f s",
                    record.host_pid,
                    record.job_id,
                    record.rank,
                    self.registry.keepalive_s,
                )
            self._expiry = loop.call_later(self.registry.keepalive_s / 4, sweep)

        self._expiry = loop.call_later(self.registry.keepalive_s / 4, sweep)


def _log_registered(record: ProcessRecord) -> None:
    log.info(
        "registered process %d (%s, job %d, rank %d)",
        record.host_pid,
        "+".join(sorted(kind.value for kind in record.clients)),
        record.job_id,
        record.rank,
    )
