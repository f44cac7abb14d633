"""Answering one legacy request: who may call it (under mutual TLS), the client's rate, which command
kind the config text is, admission, then the pipeline every wire shares."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence

from dynoproto import SERVICE, legacy
from msmonitor_contract import configtext
from msmonitor_contract.kinds import GPUTRACE, NPUMONITOR, NPUTRACE

from ... import __version__
from ...core.logs import Once
from ...kinds.gputrace import GpuTrace
from ...kinds.npumonitor import NpuMonitor
from ...kinds.nputrace import NpuTrace
from ...node import Node, msmonitor_status
from .. import admission
from ..auth import AccessPolicy, Peer, RefusalLog, Revocation, authorize
from ..limits import ClientLimiter, client_for
from . import answer
from .request import Call, CancelTrace, Failed, SetConfig, parse

log = logging.getLogger("dynolog.edge.legacy")

# Keys only msMonitor's nputrace writes: a text without them is dynolog's gputrace (stock Kineto's).
_NPUTRACE_ONLY = frozenset(k.name for k in NPUTRACE.keys) - {k.name for k in GPUTRACE.keys}
_NPU_MONITOR_KEY = NPUMONITOR.field("start").config_key().name  # msMonitor's daemon tells npu-monitor so

_RPC_OF_CALL = {legacy.GET_STATUS: "GetStatus", legacy.GET_VERSION: "GetVersion"}
_CANCEL_RPC = "CancelTrace"


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the verified certificate under mutual TLS, and the address."""

    peer: Optional[Peer]
    host: str

    def describe(self) -> str:
        return self.peer.describe() if self.peer is not None else self.host


@dataclass(frozen=True)
class Authorization:
    policy: AccessPolicy
    revocation: Revocation
    refusals: RefusalLog


class LegacyService:
    def __init__(
        self,
        node: Optional[Node],
        authorization: Optional[Authorization],  # None: plaintext, nobody to authorize
        limiter: Optional[ClientLimiter],
        trace_roots: Sequence[str] = (),
    ) -> None:
        self._node = node
        self._authorization = authorization
        self._limiter = limiter
        self._trace_roots = tuple(trace_roots)
        self._said = Once()

    async def answer(self, body: bytes, caller: Caller) -> bytes:
        """The reply to *body*; raises LegacyError for what gets none (the connection is closed)."""
        request = parse(body)
        method = f"/{SERVICE}/{self._rpc(request)}"
        refusal = self._refusal(caller, method)
        if refusal is not None:
            return legacy.reply(answer.refused(refusal))
        return legacy.reply(await self._answer(request, caller))

    async def _answer(self, request: Any, caller: Caller) -> Dict[str, Any]:
        if isinstance(request, Call):
            if request.fn == legacy.GET_VERSION:
                return answer.version(__version__)
            return answer.status(msmonitor_status(self._node))
        if isinstance(request, Failed):
            return answer.refused(request.why)
        if isinstance(request, CancelTrace):
            return await self._cancel(request.trace_id, caller)
        return await self._command(request, caller)

    async def _cancel(self, trace_id: str, caller: Caller) -> Dict[str, Any]:
        trace = self._node.traces.get(trace_id) if self._node is not None else None
        if self._node is None or trace is None:
            return answer.refused(f"no trace {trace_id[:64]!r} on this daemon")
        log.info("legacy cancel of trace %s from %s", trace_id, caller.describe())
        await self._node.cancel(trace)
        return answer.cancelled(trace)

    async def _command(self, request: SetConfig, caller: Caller) -> Dict[str, Any]:
        node = self._node
        if node is None:
            return answer.refused("this daemon runs without --enable-ipc-monitor: no process can register")
        policy = node.commands[_kind(request.config)]
        try:
            command = policy.from_text(request.config, request.targets)
        except configtext.ConfigTextError as exc:
            return self._refused(policy.kind.value, caller, str(exc))
        assert policy.declaration is not None
        refusals = admission.refusals(policy.declaration, command, self._trace_roots)
        if refusals:
            return self._refused(policy.kind.value, caller, "; ".join(refusals))
        result = await node.pipeline.run(policy, command)
        # The daemon's log names the trace: `dyno trace ID` follows it, whichever dyno started it.
        log.info("legacy %s from %s: %s", policy.label(command), caller.describe(), result.message)
        return answer.command(result)

    def _refused(self, kind: str, caller: Caller, why: str) -> Dict[str, Any]:
        if self._said((caller.describe(), why)):
            log.warning("legacy %s from %s refused: %s", kind, caller.describe(), why)
        return answer.refused(why)

    def _rpc(self, request: Any) -> str:
        """The gRPC method the request is the legacy spelling of: what it is authorized and limited as."""
        if isinstance(request, Call):
            return _RPC_OF_CALL[request.fn]
        if isinstance(request, SetConfig):
            return _kind(request.config)
        if isinstance(request, CancelTrace):
            return _CANCEL_RPC
        return NpuTrace.rpc  # a malformed command is still a command: a read-only client learns nothing

    def _refusal(self, caller: Caller, method: str) -> Optional[str]:
        if self._authorization is not None:
            auth = self._authorization
            refused = authorize(caller.peer, method, auth.policy, auth.revocation)
            if refused is not None:
                auth.refusals.note(caller.peer, f"{method} (legacy JSON RPC)", refused)
                return refused.message
        if self._limiter is not None:
            return self._limiter.admit(client_for(caller.peer, caller.host), method, stream=False)
        return None


def _kind(config: str) -> str:
    """Which command kind the text is: the RPC it would have come by."""
    try:
        keys = set(configtext.parse(config))
    except configtext.ConfigTextError:
        keys = set()  # read again, and refused naming the line, by the kind it falls to
    if _NPU_MONITOR_KEY in keys:
        return NpuMonitor.rpc
    return NpuTrace.rpc if keys & _NPUTRACE_ONLY else GpuTrace.rpc
