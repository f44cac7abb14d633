"""How a command reaches a process: pushed to its plugin at once, through the socket the plugin talks
to (a reply from any other address is dropped by it), or left in its outbox for the next ``req`` of a
client that polls (stock Kineto, msMonitor's).

A push into a full socket is lost without a word, so every push is kept until the process answers it
and pushed again at each of its heartbeats; the plugin answers a repeat without applying it twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from msmonitor_contract import wire
from msmonitor_contract.vocabulary import CommandKind

from ..ipc.endpoint import IpcEndpoint
from .registry import ClientKind, ProcessRecord


@dataclass(frozen=True)
class Unanswered:
    command_id: str
    text: str
    final_only: bool  # answered only by the command's end (a window's stop), not by its first news


class Delivery:
    def __init__(self) -> None:
        self._endpoints: Dict[int, IpcEndpoint] = {}  # by host pid: where each plugin process talks
        # By host pid, then kind: the last command pushed and not yet answered.
        self._unanswered: Dict[int, Dict[CommandKind, Unanswered]] = {}

    def plugin_seen(self, host_pid: int, endpoint: IpcEndpoint) -> None:
        self._endpoints[host_pid] = endpoint

    def forget(self, host_pid: int) -> None:
        self._endpoints.pop(host_pid, None)
        self._unanswered.pop(host_pid, None)

    def stage_or_push(self, record: ProcessRecord, kind: CommandKind, command_id: str, text: str) -> bool:
        """True when pushed; otherwise the text waits in the process's outbox, for the client that
        polls for *kind* (a framework's helper, in a process whose plugin leaves nputrace to it)."""
        if not record.runs_itself(kind):
            record.outbox = text
            return False
        self.push(record, kind, command_id, text)
        return True

    def push(
        self, record: ProcessRecord, kind: CommandKind, command_id: str, text: str, final_only: bool = False
    ) -> None:
        """Push now, and again at each heartbeat until :meth:`answered`."""
        self._unanswered.setdefault(record.host_pid, {})[kind] = Unanswered(command_id, text, final_only)
        self._send(record, kind, command_id, text)

    def answered(self, host_pid: int, kind: CommandKind, command_id: str, final: bool = True) -> None:
        """The process answered *command_id* (*final*: with the command's end)."""
        pending = self._unanswered.get(host_pid, {})
        unanswered = pending.get(kind)
        if unanswered is None or unanswered.command_id != command_id:
            return
        if final or not unanswered.final_only:
            del pending[kind]

    def heartbeat(self, record: ProcessRecord) -> None:
        """The process is listening: what it has not answered is pushed again."""
        for kind, unanswered in list(self._unanswered.get(record.host_pid, {}).items()):
            self._send(record, kind, unanswered.command_id, unanswered.text)

    def _send(self, record: ProcessRecord, kind: CommandKind, command_id: str, text: str) -> None:
        endpoint = self._endpoints.get(record.host_pid)
        address = record.addresses.get(ClientKind.PLUGIN)
        if endpoint is None or address is None:
            return
        command = wire.Command(kind=kind.value, trace_id=command_id, config=text)
        endpoint.send(wire.encode(wire.COMMAND, command.to_payload()), address)
