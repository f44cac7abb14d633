"""How a command reaches a process: pushed to its plugin at once, through the socket the plugin talks
to (a reply from any other address is dropped by it), or left in its outbox for the next ``req`` of a
client that polls (stock Kineto, msMonitor's)."""

from __future__ import annotations

from typing import Dict

from msmonitor_plugin import wire
from msmonitor_plugin.vocabulary import CommandKind

from .ipc import IpcEndpoint
from .registry import ClientKind, ProcessRecord


class Delivery:
    def __init__(self) -> None:
        self._endpoints: Dict[int, IpcEndpoint] = {}  # by host pid: where each plugin process talks

    def plugin_seen(self, host_pid: int, endpoint: IpcEndpoint) -> None:
        self._endpoints[host_pid] = endpoint

    def forget(self, host_pid: int) -> None:
        self._endpoints.pop(host_pid, None)

    def send(self, record: ProcessRecord, kind: CommandKind, command_id: str, text: str) -> bool:
        """True when pushed; otherwise the text waits in the process's outbox, for the client that
        polls for *kind* (a framework's helper, in a process whose plugin leaves nputrace to it)."""
        if not record.runs_itself(kind):
            record.outbox = text
            return False
        self.push(record, kind, command_id, text)
        return True

    def push(self, record: ProcessRecord, kind: CommandKind, command_id: str, text: str) -> bool:
        """False when it could not be queued (the plugin resends its state; the command is pushed again)."""
        endpoint = self._endpoints.get(record.host_pid)
        address = record.addresses.get(ClientKind.PLUGIN)
        if endpoint is None or address is None:
            return False
        command = wire.Command(kind=kind.value, trace_id=command_id, config=text)
        return endpoint.send(wire.encode(wire.COMMAND, command.to_payload()), address)
