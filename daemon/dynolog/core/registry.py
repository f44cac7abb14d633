"""The processes this daemon knows, one record per process, keyed by its kernel-verified pid.

A process may reach the daemon through this project's plugin (``mm.hello``), through stock Kineto's
``req`` polls, or both; either way it is one record, so it shows once and gets a command once.

torch_npu's and MindSpore's dynamic profilers fork a monitor *helper* that polls through ``IPCMonitor``
while the training process itself runs the plugin: the helper is folded into its training process's
record (it is where that process's framework takes commands), so one rank is one record.
"""

from __future__ import annotations

import enum
import os
import time
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Set, Tuple

from msmonitor_contract import pids, wire
from msmonitor_contract.vocabulary import CommandKind, MonitorState, TraceState

from ..ipc.endpoint import Sender
from .changed import Changed


class ClientKind(enum.Enum):
    PLUGIN = "plugin"  # this project's plugin (mm.hello)
    KINETO = "kineto"  # stock PyTorch: polls with req, runs gputrace configs
    MSMONITOR = "msmonitor"  # msMonitor's contract (ctxt, req, status structs): torch_npu, MindSpore


@dataclass
class ProcessRecord:
    host_pid: int  # kernel-verified (SO_PASSCRED), in the daemon's pid namespace
    pid: int  # as the process sees itself: the kernel's (NSpid), else its claim (shown, never matched)
    uid: int
    # Both read from /proc by the daemon, never taken from the process's word: a process of another
    # allowed uid that claimed a victim's pid as its ancestor would be selected by `--pids <victim>`.
    ancestors: Tuple[int, ...] = ()  # in the process's own pid namespace: they differ inside a container
    host_ancestors: Tuple[int, ...] = ()  # in the daemon's
    pid_known: bool = True  # whether *pid* is the kernel's and may select it (a claim selects nothing)
    ancestors_known: bool = True  # whether *ancestors* may select it (see _new_record)
    job_id: int = 0
    rank: int = -1
    local_rank: int = -1
    world_size: int = -1
    devices: Tuple[int, ...] = ()
    backend: str = "kineto"
    hostname: str = ""
    versions: Dict[str, str] = field(default_factory=dict)
    plugin_version: str = ""
    capabilities: Tuple[str, ...] = ()
    service_profiler: str = ""  # the inference service profiler's switch, as the plugin reports it
    clients: Set[ClientKind] = field(default_factory=set)
    # Where to reach each client: the plugin accepts pushes, Kineto only replies to polls.
    addresses: Dict[ClientKind, wire.Address] = field(default_factory=dict)
    current_step: int = 0
    # A command staged for a client that polls (Kineto, msMonitor's), taken by its next `req`.
    outbox: Optional[str] = None
    context: Optional[Tuple[int, int]] = None  # the (job, device) of its last ctxt
    # The trace slot as a framework that runs its own profiler reports it (msMonitor's status structs,
    # Kineto's polls), with the steps of the trace that is ready or running. What this daemon staged is
    # the trace store's to say (TraceStore.state_of).
    framework_trace: TraceState = TraceState.UNINITIALIZED
    framework_steps: Tuple[int, int] = (-1, -1)
    monitor_state: MonitorState = MonitorState.UNINITIALIZED
    # Who holds the process's one profiler, as its plugin last said (Hello.profiler; "" when free); what
    # ended since is cleared at once, by the event that says so.
    profiler: str = ""
    registered_at: float = field(default_factory=time.time)
    last_seen: float = field(default_factory=time.monotonic)
    helpers: Set[int] = field(default_factory=set)  # host pids of the framework helpers folded in here

    def pid_chain(self) -> Tuple[int, ...]:
        """Every pid a ``--pids`` filter may name: itself and its ancestors, in both pid namespaces, all
        as the kernel numbers them."""
        own = (self.pid,) if self.pid_known else ()
        inner = self.ancestors if self.ancestors_known else ()
        return (self.host_pid, *own, *inner, *self.host_ancestors)

    @property
    def accepts_push(self) -> bool:
        return ClientKind.PLUGIN in self.clients and "push" in self.capabilities

    def runs_itself(self, kind: CommandKind) -> bool:
        """Whether this project's plugin runs *kind* here (pushed to it; its word on the state counts)."""
        return self.accepts_push and kind.value in self.capabilities

    def can_run(self, kind: CommandKind, pulled_by: Optional[ClientKind]) -> bool:
        """Whether some client in this process runs *kind*: its plugin, or the client that polls for it."""
        if ClientKind.PLUGIN in self.clients and kind.value in self.capabilities:
            return True
        return pulled_by in self.clients


def _alive(host_pid: int) -> bool:
    return os.path.exists(f"/proc/{host_pid}")


def _cmdline(host_pid: int) -> bytes:
    try:
        with open(f"/proc/{host_pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _new_record(sender: Sender, claimed: int) -> ProcessRecord:
    """A new process's record: its pids and ancestors read from /proc; its claimed pid is kept only to
    be shown where /proc says nothing.

    Its pids inside a pid namespace of its own are matched only where that namespace is the daemon's
    user namespace's: a user who may create user namespaces (most distributions let anyone) makes a pid
    namespace of its own and picks the pids in it (``ns_last_pid``, ``clone3``), a victim's among them.
    A container run by root keeps its pids; a rootless one is matched by its host pids."""
    own = ns_pids(sender.pid)
    host_ancestors = tuple(pids.ancestors(sender.pid))
    trusted = len(own) <= 1 or _in_our_user_namespace(sender.pid)
    return ProcessRecord(
        host_pid=sender.pid,
        pid=_innermost(own, claimed),
        uid=sender.uid,
        ancestors=inner_ancestors(len(own), host_ancestors),
        host_ancestors=host_ancestors,
        pid_known=bool(own) and trusted,
        ancestors_known=trusted,
    )


def _in_our_user_namespace(host_pid: int) -> bool:
    try:
        theirs, ours = os.stat(f"/proc/{host_pid}/ns/user"), os.stat("/proc/self/ns/user")
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def _is_helper_of(record: ProcessRecord, job: ProcessRecord) -> bool:
    """*record* is a framework's monitor helper forked by *job*: it talks msMonitor's contract without a
    plugin of its own, its parent is *job*, whose plugin runs, and it was forked, not exec'd (same
    command line). A launcher's workers are exec'd, so they stay processes of their own."""
    return (
        record.clients == {ClientKind.MSMONITOR}
        and record.host_ancestors[:1] == (job.host_pid,)
        and ClientKind.PLUGIN in job.clients
        and _cmdline(record.host_pid) == _cmdline(job.host_pid) != b""
    )


def ns_pids(host_pid: int) -> Tuple[int, ...]:
    """The process's pid in each pid namespace from the daemon's down to its own (the kernel's NSpid
    line); empty where /proc says nothing (gone, hidden by ``hidepid``, a kernel before 4.1)."""
    try:
        with open(f"/proc/{host_pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return tuple(int(n) for n in line.split()[1:])
    except (OSError, ValueError):
        pass
    return ()


def inner_pid(host_pid: int, claimed: int) -> int:
    """The pid the process has in its own (innermost) pid namespace, from the kernel's NSpid line.

    The kernel's word beats the process's claim; where /proc says nothing the claim stands, for
    display only (:attr:`ProcessRecord.pid_known`).
    """
    return _innermost(ns_pids(host_pid), claimed)


def _innermost(own: Tuple[int, ...], claimed: int) -> int:
    return own[-1] if own else claimed


def inner_ancestors(depth: int, host_ancestors: Tuple[int, ...]) -> Tuple[int, ...]:
    """*host_ancestors* of a process *depth* pid namespaces below the daemon's (its NSpid entries) as
    its own namespace numbers them, up to the first that is not in it (the container's init or above;
    pid 1 is left out, as Kineto and the plugin leave it out).

    A parent's pid namespace is its child's or an ancestor of it, so an ancestor as deep as the
    process is in the process's namespace. In the daemon's namespace (depth 1) they are the same
    pids; empty where /proc did not say (depth 0)."""
    if depth <= 1:
        return host_ancestors if depth else ()
    chain: List[int] = []
    for ancestor in host_ancestors:
        theirs = ns_pids(ancestor)
        if len(theirs) != depth or theirs[-1] <= 1:
            break
        chain.append(theirs[-1])
    return tuple(chain)


class Registry:
    def __init__(self, keepalive_s: float) -> None:
        self.keepalive_s = keepalive_s
        self._by_pid: Dict[int, ProcessRecord] = {}
        # ctxt registrations (job, device) -> pids, answered with their count as dynolog does.
        self._contexts: Dict[Tuple[int, int], Set[int]] = {}
        # A process registered or changed its backend (imported a framework).
        self.changed = Changed()
        # Framework helpers folded into their training process: helper host pid -> the job's host pid.
        self._helpers: Dict[int, int] = {}
        # Helpers whose training process is gone, still polling (schedulers kill the job, and the helper
        # would poll on for ever): not job processes, heard no more while they live.
        self._orphans: Set[int] = set()
        # Each registered pid's uid (helpers' included) and how many each uid has registered: the share
        # of --max-ipc-clients per uid, counted as processes come and go rather than on every refusal.
        self._uid_of: Dict[int, int] = {}
        self._per_uid: Dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._by_pid)

    @property
    def registered(self) -> int:
        """Processes registered, the helpers folded into their job's record included (each has a pid
        and a pidfd of its own): what ``--max-ipc-clients`` caps."""
        return len(self._by_pid) + len(self._helpers)

    def registered_by(self, uid: int) -> int:
        """Processes of *uid* registered, counted as :attr:`registered` counts them."""
        return self._per_uid.get(uid, 0)

    def __iter__(self) -> Iterator[ProcessRecord]:
        return iter(list(self._by_pid.values()))

    def get(self, host_pid: int) -> Optional[ProcessRecord]:
        """The record of *host_pid*, or of the job whose helper it is."""
        return self._by_pid.get(self._helpers.get(host_pid, host_pid))

    def touch(self, sender: Sender, pid: int, kind: ClientKind) -> ProcessRecord:
        """The record of the *sender* (registered now if new, as *pid* in its own namespace), heard from
        just now through *kind*'s client."""
        host_pid, address = sender.pid, sender.address
        record = self.get(host_pid)
        if record is None:
            record = self._by_pid[host_pid] = _new_record(sender, pid)
            self._count(host_pid, sender.uid)
            record.clients.add(kind)  # what it is decides whether it folds
            record = self._fold(record)
            self._announce()
        if host_pid not in self._helpers:  # a helper's hello must not pass for its job's plugin
            record.clients.add(kind)
            record.addresses[kind] = address
        elif kind is ClientKind.MSMONITOR:
            record.addresses[kind] = address
        record.last_seen = time.monotonic()
        return record

    def _fold(self, record: ProcessRecord) -> ProcessRecord:
        """Fold a new helper into its registered job, or the registered helpers of a new job into it;
        the record that stands for the new process."""
        parent = self._by_pid.get(record.host_ancestors[0]) if record.host_ancestors else None
        if parent is not None and _is_helper_of(record, parent):
            self._merge(record, parent)
            return parent
        for helper in [r for r in self._by_pid.values() if _is_helper_of(r, record)]:
            self._merge(helper, record)
        return record

    def _merge(self, helper: ProcessRecord, job: ProcessRecord) -> None:
        del self._by_pid[helper.host_pid]
        self._helpers[helper.host_pid] = job.host_pid
        job.helpers.add(helper.host_pid)
        job.clients.add(ClientKind.MSMONITOR)
        if ClientKind.MSMONITOR in helper.addresses:
            job.addresses[ClientKind.MSMONITOR] = helper.addresses[ClientKind.MSMONITOR]
        if job.outbox is None:
            job.outbox = helper.outbox
        if helper.context is not None:
            self._leave_context(helper.context, helper.host_pid)
            job.context = job.context or helper.context
            self._contexts.setdefault(job.context, set()).add(job.host_pid)
        job.devices = job.devices or helper.devices

    def is_helper(self, host_pid: int) -> bool:
        return host_pid in self._helpers

    def join_context(self, record: ProcessRecord, key: Tuple[int, int]) -> None:
        """*record* registered with msMonitor's ``ctxt`` on (job, device); where it was before, it left."""
        if record.context is not None and record.context != key:
            self._leave_context(record.context, record.host_pid)
        record.context = key
        self._contexts.setdefault(key, set()).add(record.host_pid)

    def _leave_context(self, key: Tuple[int, int], host_pid: int) -> None:
        """An empty (job, device) is dropped: a process re-registering under ever-new ids must not grow it."""
        pids = self._contexts.get(key)
        if pids is not None:
            pids.discard(host_pid)
            if not pids:
                del self._contexts[key]

    def peers(self, record: ProcessRecord) -> int:
        """How many processes registered on the (job, device) of *record*'s ctxt, as dynolog answers."""
        return len(self._contexts.get(record.context, ())) if record.context is not None else 0

    def left(self, host_pid: int, kind: ClientKind) -> None:
        """*kind*'s client in the process said goodbye; with no client left the process is forgotten."""
        record = self._by_pid.get(host_pid)
        if record is None:
            return
        record.clients.discard(kind)
        record.addresses.pop(kind, None)
        if not record.clients:
            self._forget(host_pid)

    def expire(self, now: Optional[float] = None) -> List[ProcessRecord]:
        """Forget processes that exited or were not heard from within the keep-alive; returns them.
        Their helpers still alive become orphans; a helper that exited leaves its job's record."""
        now = time.monotonic() if now is None else now
        self._orphans = {pid for pid in self._orphans if _alive(pid)}
        for helper, job in list(self._helpers.items()):
            if not _alive(helper):
                self._drop_helper(helper, self._by_pid[job])
        stale = [
            r for r in self._by_pid.values() if now - r.last_seen > self.keepalive_s or not _alive(r.host_pid)
        ]
        for record in stale:
            self._forget(record.host_pid)
        return stale

    def exited(self, host_pid: int) -> Optional[ProcessRecord]:
        """The kernel said *host_pid* exited: forget it at once; its record, unless it was a helper (which
        leaves its job's record) or was forgotten already."""
        self._orphans.discard(host_pid)
        job = self._helpers.get(host_pid)
        if job is not None:
            self._drop_helper(host_pid, self._by_pid[job])
            return None
        if host_pid not in self._by_pid:
            return None
        record = self._by_pid[host_pid]
        self._forget(host_pid)
        return record

    def _drop_helper(self, helper: int, job: ProcessRecord) -> None:
        del self._helpers[helper]
        self._uncount(helper)
        job.helpers.discard(helper)
        if not job.helpers:  # nobody polls for the framework any more: stage nothing for it
            job.clients.discard(ClientKind.MSMONITOR)
            job.addresses.pop(ClientKind.MSMONITOR, None)
            job.outbox = None

    def is_orphan(self, host_pid: int) -> bool:
        """A helper left polling by a killed job: not a job process, whatever it sends."""
        return host_pid in self._orphans

    def set_backend(self, record: ProcessRecord, backend: str) -> None:
        """The process imported a framework: a launched job's session waits for that."""
        if record.backend != backend:
            record.backend = backend
            self._announce()

    def _announce(self) -> None:
        self.changed.notify()

    def _forget(self, host_pid: int) -> None:
        record = self._by_pid.pop(host_pid)
        self._uncount(host_pid)
        for helper in record.helpers:
            del self._helpers[helper]
            self._uncount(helper)
            if _alive(helper):
                self._orphans.add(helper)
        if record.context is not None:
            self._leave_context(record.context, host_pid)

    def _count(self, host_pid: int, uid: int) -> None:
        self._uid_of[host_pid] = uid
        self._per_uid[uid] = self._per_uid.get(uid, 0) + 1

    def _uncount(self, host_pid: int) -> None:
        uid = self._uid_of.pop(host_pid)
        left = self._per_uid[uid] - 1
        if left:
            self._per_uid[uid] = left
        else:
            del self._per_uid[uid]  # the uids that have processes registered, no more
