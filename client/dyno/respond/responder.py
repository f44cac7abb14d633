"""What ``dyno respond`` does with a notification, on one worker thread behind the webhook.

Per alert: a resolved one is recorded on its incident, nothing sent. A firing one already recorded
(the same fingerprint and startsAt: Alertmanager's repeat, retry, or a group re-sent because another
alert changed) counts as a repeat. A new one that began firing before its job's last capture ended is
recorded on that capture's incident (the capture saw it). Any other new one becomes an incident, and
the new alerts of one job in one notification share it (one capture serves them all). Then, in order,
each reason not to trace is recorded as the incident's action: a job_id or rank label that is not an
integer (the alert refused, naming it), no job id in its labels, the rate limit
(``--max``), a job with no process left where ``--hosts-from`` points. Otherwise the job is traced at
one start step on every rank, the rank set collected, the record written, the set analysed, the record
written again. With ``--dry-run`` everything up to the trace is done (hosts, processes, start step, the
request) and the request recorded, not sent.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from msmonitor_contract.kinds import NPUTRACE

from ..edge.rpc import request_json
from ..exits import CliError
from ..fleet.target import Target
from ..tracing.sync import SyncedStart
from . import analysis, capture, jobs
from .alerts import RESOLVED, Alert, Notification
from .store import TRACED, Incident, JobIncidentStore, RateLimit
from .webhook import QueueFull

QUEUE_SIZE = 64  # notifications waiting; beyond, the webhook answers 503 and Alertmanager retries
DRY_RUN = "dry run"
NOT_TRACED = "not traced"
TRACING = "tracing"  # the capture in progress

Log = Callable[[str], None]


@dataclass(frozen=True)
class Settings:
    hosts_from: jobs.HostsFrom
    capture: capture.CaptureSettings
    limit: RateLimit
    dry_run: bool = False
    alert_names: Tuple[str, ...] = ()  # only these alerts (by alertname); empty: every one


class Responder:
    def __init__(
        self,
        target: Target,
        settings: Settings,
        store: JobIncidentStore,
        log: Log,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self.target, self.settings, self.store, self.log = target, settings, store, log
        self._queue: queue.Queue[Optional[Notification]] = queue.Queue(queue_size)
        self._worker = threading.Thread(target=self._work, name="dyno-respond", daemon=True)

    def start(self) -> None:
        self._worker.start()

    def submit(self, notification: Notification) -> int:
        """Queue *notification* (from the webhook's thread); the number waiting, or :class:`QueueFull`."""
        try:
            self._queue.put_nowait(notification)
        except queue.Full:
            raise QueueFull() from None
        return self._queue.qsize()

    def stop(self, timeout: float) -> None:
        """Let the incident in progress finish (within *timeout*); what is still queued is logged."""
        dropped: List[Notification] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                dropped.append(item)
        for notification in dropped:
            self.log(f"stopping: not handled: {notification.summary()}")
        if self._worker.is_alive():
            self._queue.put(None)
            self._worker.join(timeout)
        if self._worker.is_alive():  # a capture still running: its record must not say "tracing" for ever
            for incident in self.store.list():
                if incident.action == TRACING:
                    incident.action = f"{NOT_TRACED}: dyno respond stopped during the capture"
                    incident.note(incident.action)
                    self.store.update(incident)
                    self.log(f"incident {incident.id}: {incident.action}")

    def _work(self) -> None:
        while (notification := self._queue.get()) is not None:
            try:
                self.handle(notification)
            except Exception:  # one bad notification must not end the responder
                # Not its summary: what raised may be in what the summary reads of it.
                count, group = len(notification.alerts), notification.group_key[:200]
                self.log(f"error handling {count} alert(s) of group {group!r}:\n{traceback.format_exc()}")

    # --- one notification ------------------------------------------------------------------------

    def handle(self, notification: Notification) -> None:
        by_job: Dict[Optional[int], List[Alert]] = {}
        for alert in notification.alerts:
            if self._guarded(alert, self._is_new, alert):
                by_job.setdefault(alert.job_id, []).append(alert)
        for job_id, alerts in by_job.items():
            groups = [[a] for a in alerts] if job_id is None else [alerts]  # no job: nothing to share
            for group in groups:
                self._guarded(group[0], self._respond, group, notification)

    def _guarded(self, alert: Alert, step: Callable[..., Any], *args: Any) -> Any:
        """*step*'s result; None once what it raised is logged: the next alert is not this one's to lose."""
        try:
            return step(*args)
        except Exception:
            name = alert.name or "(no alertname)"
            self.log(f"{name} ({alert.fingerprint}): not handled:\n{traceback.format_exc()}")
            return None

    def _is_new(self, alert: Alert) -> bool:
        """Whether *alert* calls for an incident of its own; any other is recorded where it belongs."""
        if self.settings.alert_names and alert.name not in self.settings.alert_names:
            return False
        if alert.status == RESOLVED:
            self._resolved(alert)
            return False
        known = self.store.find(alert.key)
        if known is not None:
            known.repeats += 1
            self.store.update(known)
            return False
        return not self._joined(alert)

    def _joined(self, alert: Alert) -> bool:
        """An alert of a job whose last capture it began before the end of: that capture saw its slowdown
        (another rank or name of the same straggler, or a rank's figures held while its monitor paused
        for the trace). It is recorded on that incident, not traced again."""
        if alert.job_id is None:
            return False
        latest = self.store.list(alert.job_id, limit=1)
        if not latest or not latest[0].traced:
            return False
        episode, started = latest[0], alert.started
        if started is None or episode.ended_at is None or started > episode.ended_at:
            return False
        episode.also_alerted.append(alert.to_json())
        episode.note(f"also alerted, during its capture: {alert.name} rank {_rank(alert)}")
        self.store.attach(alert.key, episode.id)
        self.store.update(episode)
        self.log(f"incident {episode.id}: also alerted: {alert.name} rank {_rank(alert)}")
        return True

    def _resolved(self, alert: Alert) -> None:
        incident = self.store.find(alert.key)
        if incident is None:
            self.log(f"resolved: {alert.name} ({alert.fingerprint}): no incident of it, nothing recorded")
            return
        if incident.resolved_at is None:
            incident.resolved_at = time.time()
            incident.note(f"resolved: {alert.name} rank {_rank(alert)} (endsAt {alert.ends_at})")
            self.store.update(incident)
            self.log(f"incident {incident.id}: resolved")

    def _respond(self, alerts: Sequence[Alert], notification: Notification) -> None:
        first, others = alerts[0], alerts[1:]
        incident = Incident(
            id=self._new_id(first),
            at=time.time(),
            job_id=first.job_id or 0,
            action=TRACING,
            alert={**first.to_json(), "receiver": notification.receiver, "groupKey": notification.group_key},
            suspect={"host": first.host, "rank": first.rank},
            also_alerted=[a.to_json() for a in others],
            hosts_from=str(self.settings.hosts_from),
            iterations=self.settings.capture.iterations,
        )
        incident.note(f"alert received: {first.name} rank {_rank(first)} on {first.host or '?'}")
        self.store.add(incident, first.key)
        for other in others:
            self.store.attach(other.key, incident.id)
        began = time.monotonic()
        try:
            incident.action = self._act(incident, first)
        except Exception as exc:  # the record says why; the trace is the responder's to lose, not the record
            incident.action = f"{NOT_TRACED}: {type(exc).__name__}: {exc}"
            self.log(f"incident {incident.id}: {traceback.format_exc()}")
        incident.note(incident.action)
        incident.ended_at = time.time()
        self.store.update(incident)
        took = time.monotonic() - began
        self.log(f"incident {incident.id}: job {incident.job_id}: {_outcome(incident)} ({took:.1f}s)")

    def _act(self, incident: Incident, alert: Alert) -> str:
        """The incident's action, doing it: why not, the dry run, or the capture."""
        if alert.refused:
            return f"{NOT_TRACED}: refused: {alert.refused}"
        if alert.job_id is None:
            return f"{NOT_TRACED}: the alert names no job (a job_id, job or exported_job label)"
        limit = self.settings.limit
        if not self.settings.dry_run and self.store.traced_since(time.time() - limit.window_s) >= limit.most:
            return f"{NOT_TRACED}: rate limit (--max {limit.text})"
        try:
            job = jobs.job_hosts(alert.job_id, self.settings.hosts_from, self.target)
        except jobs.JobGone as gone:
            return f"{NOT_TRACED}: {gone}"
        incident.hosts = job.hosts
        incident.note(f"job {job.job_id}: {len(job.processes)} process(es) on {len(job.hosts)} host(s)")
        if not incident.suspect["host"] and alert.rank is not None:
            incident.suspect["host"] = capture.suspect_of(job.processes, alert.rank)
        try:
            return self._trace(incident, job)
        except CliError as exc:  # the job left between two looks; a daemon stopped answering
            return f"{NOT_TRACED}: {str(exc).splitlines()[0]}"

    def _trace(self, incident: Incident, job: jobs.JobHosts) -> str:
        settings = self.settings.capture
        folder = f"{settings.node_dir.rstrip('/')}/{incident.id}"
        trace = capture.request(job, settings, folder)
        incident.request = {"command": capture.command_line(job, settings, folder)}
        if self.settings.dry_run:
            self._record_request(incident, dataclasses.replace(trace, start_step=capture.plan(job, trace)))
            return DRY_RUN
        synced = capture.start(job, trace)
        sent = dataclasses.replace(trace, start_step=synced.sync.start_step)
        self._record_request(incident, sent)
        incident.note(f"trace sent: steps {sent.start_step}-{sent.start_step + sent.iterations - 1}")
        self.store.update(incident)  # a reader sees it in progress
        return self._finish(incident, job, synced)

    def _record_request(self, incident: Incident, trace: Any) -> None:
        incident.steps = {"start": trace.start_step, "stop": trace.start_step + trace.iterations}
        assert incident.request is not None
        incident.request["NpuTraceRequest"] = request_json(NPUTRACE, trace)

    def _finish(self, incident: Incident, job: jobs.JobHosts, synced: SyncedStart) -> str:
        folder = self.store.incident_dir(incident.id)
        taken = capture.finish(job, synced, self.settings.capture, folder)
        incident.ranks = [dataclasses.asdict(r) for r in taken.ranks]
        incident.trace_dir = capture.TRACES
        for why in taken.failed:
            incident.note(f"not complete: {why}")
        files = sum(len(r.files) for r in taken.ranks)
        incident.note(f"collected {files} path(s) of {len(taken.ranks)} rank(s)")
        if not taken.ranks:
            return f"{NOT_TRACED}: {'; '.join(taken.failed) or 'no process took the trace'}"
        action = TRACED if taken.complete else f"{TRACED} partly: {'; '.join(taken.failed)}"
        missing = capture.missing_ranks(job, taken.ranks)
        if missing:
            incident.note(f"no trace of rank(s) {', '.join(map(str, missing))}")
        incident.action = action
        self.store.update(incident)  # the traces are there: recorded before the analysis runs
        try:
            found = analysis.analyse(os.path.join(folder, capture.TRACES))
        except Exception as exc:  # the traces are there all the same: still traced (and counted by --max)
            incident.note(f"not analysed: {type(exc).__name__}: {exc}")
            return action
        incident.analysis = found.to_json()
        incident.hta_ranks = found.ranks_found
        incident.note(f"analysed ({found.method}): slowest rank {found.slowest_rank}")
        return action

    def _new_id(self, alert: Alert) -> str:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        base = f"{stamp}-job{alert.job_id or 0}-{alert.fingerprint[:8]}"
        taken, n = base, 1
        while self.store.get(taken) is not None:
            n += 1
            taken = f"{base}-{n}"
        return taken


def _rank(alert: Alert) -> str:
    return "?" if alert.rank is None else str(alert.rank)


def _outcome(incident: Incident) -> str:
    if not incident.traced:
        return incident.action
    steps = f"steps {incident.steps['start']}-{incident.steps['stop'] - 1}"
    slowest = (incident.analysis or {}).get("slowest_rank")
    found = f"; slowest rank {slowest}" if slowest is not None else ""
    return (
        f"{incident.action}: {steps} on {len(incident.hosts)} host(s), {len(incident.ranks)} rank(s){found}"
    )
