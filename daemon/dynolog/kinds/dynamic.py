"""``dyno dynamic``: attaching to processes (one controller each), and each start → stop window.

A window is a trace of kind DYNAMIC: staged, pushed and followed like any other, so ``dyno trace ID``
shows it too. Its stop is a second command with the same id.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from msmonitor_contract.kinds.dynamic import DYNAMIC
from msmonitor_contract.kinds.dynamic import stop_text as dynamic_stop_text
from msmonitor_contract.targets import Targets
from msmonitor_contract.vocabulary import CommandKind, Reason

from ..core.delivery import Delivery
from ..core.model import CommandResult
from ..core.pipeline import Policy
from ..core.registry import ProcessRecord
from ..core.traces import TraceStore
from .tracing import TracePolicy

# A session's first request, as its declaration makes it (msmonitor_contract.kinds.dynamic): its
# processes, where windows go, what each records (options), its limits (0: the defaults) and who asks
# (client: under mutual TLS the certificate names them).
AttachCommand = Any


@dataclass(frozen=True)
class Hold:
    """Who controls a process through a ``dyno dynamic`` session."""

    session: int  # the session's id
    holder: str  # the certificate's name, or the user the client says it runs as
    client: str  # which dyno, from where
    since: float = field(default_factory=time.time)

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"{self.holder}, {self.client}, since {since}"


class Holds:
    """One controller per process: the session that holds each host pid."""

    def __init__(self) -> None:
        self._by_pid: Dict[int, Hold] = {}

    def of(self, host_pid: int) -> Optional[Hold]:
        return self._by_pid.get(host_pid)

    def take(self, host_pid: int, hold: Hold) -> None:
        self._by_pid[host_pid] = hold

    def release(self, session: int) -> None:
        self._by_pid = {pid: h for pid, h in self._by_pid.items() if h.session != session}

    def forget(self, host_pid: int) -> None:
        self._by_pid.pop(host_pid, None)


@dataclass
class SessionRequest:
    """An attach or a window's start: the session's targets, options and output, and who asks."""

    attach: AttachCommand
    hold: Hold

    @property
    def targets(self) -> Targets:
        return self.attach.targets


class HeldElsewhere:
    """What attaching and starting share: a process another session holds is refused, naming it."""

    holds: Holds

    def refuse(self, request: SessionRequest, record: ProcessRecord) -> Optional[Reason]:
        hold = self.holds.of(record.host_pid)
        return Reason.HELD if hold is not None and hold.session != request.hold.session else None

    def explain(self, request: SessionRequest, reason: Reason, record: ProcessRecord) -> str:
        hold = self.holds.of(record.host_pid)
        return f"held by {hold.describe()}" if reason is Reason.HELD and hold else reason.value

    def hold(self, request: SessionRequest, result: CommandResult) -> None:
        """The processes that took it are now the session's."""
        for outcome in result.taken:
            self.holds.take(outcome.record.host_pid, request.hold)


class DynamicAttach(HeldElsewhere, Policy[SessionRequest]):
    kind = CommandKind.DYNAMIC
    exclusive = False  # attaching runs nothing: a process busy with a trace may be attached to

    def __init__(self, holds: Holds) -> None:
        self.holds = holds

    def label(self, request: SessionRequest) -> str:
        return "dynamic attach"

    async def deliver(self, request: SessionRequest, result: CommandResult) -> None:
        self.hold(request, result)


class DynamicWindow(HeldElsewhere, TracePolicy[SessionRequest]):
    """A window's start; processes that registered under the session's targets since join it."""

    kind = CommandKind.DYNAMIC

    def __init__(self, traces: TraceStore, delivery: Delivery, holds: Holds) -> None:
        super().__init__(traces, delivery)
        self.holds = holds

    def label(self, request: SessionRequest) -> str:
        return "dynamic start"

    async def deliver(self, request: SessionRequest, result: CommandResult) -> None:
        self.hold(request, result)
        await super().deliver(request, result)

    def refuse(self, request: SessionRequest, record: ProcessRecord) -> Optional[Reason]:
        """Held by another session, or a folder the process could not write: both say why."""
        return HeldElsewhere.refuse(self, request, record) or TracePolicy.refuse(self, request, record)

    def explain(self, request: SessionRequest, reason: Reason, record: ProcessRecord) -> str:
        if reason is Reason.HELD:
            return HeldElsewhere.explain(self, request, reason, record)
        return TracePolicy.explain(self, request, reason, record)

    def output_folder(self, request: SessionRequest) -> str:
        return str(request.attach.output)

    def expected_output(self, request: SessionRequest, record: ProcessRecord) -> str:
        return f"{request.attach.output.rstrip('/')}/PROF_<seq>_<timestamp>_<tag>/"

    def text(self, request: SessionRequest) -> str:
        return DYNAMIC.render(request.attach)

    def stop_text(self) -> str:
        return dynamic_stop_text()
