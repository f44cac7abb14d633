"""`dyno respond`'s webhook, without daemons: Alertmanager's payload read, the bearer token, the bounds on
a body, the queue, and what the record says for duplicate, resolved and untraceable alerts.

The receiver runs in this process (its HTTP server and worker thread, as `dyno respond` builds them),
reached over real loopback HTTP; the last tests run `dyno respond` itself. The job's hosts are a host
file naming an address nobody listens on: every alert's job is gone, so nothing here needs a daemon.
"""

from __future__ import annotations

import collections
import http.client
import json
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import pytest

from dyno.fleet.target import Target
from dyno.respond import ENV, alerts, capture, jobs, responder, store, webhook
from harness import Completed, dyno, free_port, wait_until
from msmonitor_contract import slow_clients
from respond_harness import (
    MEASURED,
    STARTS_AT,
    TOKEN,
    RespondProcess,
    Slowloris,
    alert,
    incident_files,
    notification,
    post,
    status_of,
)


@dataclass
class Receiver:
    """The webhook and the responder behind it, as `dyno respond` wires them."""

    folder: Path
    records: store.JobIncidentStore
    worker: responder.Responder
    server: webhook.Webhook
    log: List[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.server.port

    def incidents(self) -> List[store.Incident]:
        return self.records.list()

    def settled(
        self, count: int, check: Callable[[store.Incident], bool] = lambda i: True
    ) -> List[store.Incident]:
        """Once the worker recorded *count* incidents, each passing *check*."""

        def done() -> List[store.Incident]:
            found = self.incidents()
            ready = len(found) == count and all(i.action != "tracing" and check(i) for i in found)
            return found if ready else []

        return wait_until(done, 10, what=f"{count} incident(s) recorded")


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Callable[..., Receiver]]:
    """Start a receiver (keyword arguments: ``token``, ``limit``, ``dry_run``, ``queue_size``, ``run_worker``,
    and any of :class:`webhook.Limits`'s fields; ``max_body`` is 4096 unless given)."""
    started: List[Receiver] = []
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"127.0.0.1:{free_port()}\n")  # nobody listens there: every job is gone

    def start(
        token: str | None = TOKEN,
        limit: str = "2/hour",
        dry_run: bool = False,
        queue_size: int = responder.QUEUE_SIZE,
        run_worker: bool = True,
        **limits: Any,
    ) -> Receiver:
        folder = tmp_path / f"incidents{len(started)}"
        settings = responder.Settings(
            jobs.HostsFrom("file", str(hostfile)),
            capture.CaptureSettings(iterations=3),
            store.rate_limit(limit),
            dry_run,
        )
        records = store.JobIncidentStore(str(folder))
        log: List[str] = []
        worker = responder.Responder(Target(timeout=2.0), settings, records, log.append, queue_size)
        token_file = None
        if token is not None:
            path = tmp_path / f"token{len(started)}"
            path.write_text(token + "\n")
            path.chmod(0o600)
            token_file = webhook.TokenFile(str(path), log.append)
        bounds = webhook.Limits(**{"max_body": 4096, **limits})
        server = webhook.Webhook(("127.0.0.1", 0), token_file, worker.submit, log.append, bounds)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        if run_worker:
            worker.start()
        one = Receiver(folder, records, worker, server, log)
        started.append(one)
        return one

    yield start
    for one in started:
        one.server.shutdown()
        one.server.server_close()
        one.worker.stop(10)
        one.records.close()


# --- the payload --------------------------------------------------------------------------------


def test_alertmanagers_measured_body_reads_as_its_alerts():
    n = alerts.parse(json.dumps(MEASURED).encode())
    assert (n.receiver, n.status, n.truncated) == ("dyno", "firing", 0)
    assert n.group_key == '{}:{alertname="MsMonitorSlowestRank", job_id="77"}'
    (a,) = n.alerts
    assert (a.name, a.job_id, a.rank, a.host) == ("MsMonitorSlowestRank", 77, 1, "n2")
    assert a.key == ("6a39be9d7731f3fb", STARTS_AT)
    # Prometheus renames a scraped `job` to `exported_job` unless told to honor labels; Kubernetes's
    # `node` is the daemon's host, where `host` is the pod's name.
    b = alerts.parse(notification(alert(job="")))
    assert b.alerts[0].job_id is None
    renamed = dict(MEASURED["alerts"][0], labels={"exported_job": "12", "node": "gpu7", "host": "pod-3"})
    c = alerts.parse(notification(renamed)).alerts[0]
    assert (c.job_id, c.host) == (12, "gpu7")


@pytest.mark.parametrize(
    "body, why",
    [
        (b"{not json", "not JSON"),
        (b"[]", "expected an object"),
        (b"[" * 200_000, "nested too deep"),
        (json.dumps({**MEASURED, "version": "3"}).encode(), "version '3'"),
        (json.dumps({**MEASURED, "alerts": {}}).encode(), "alerts: expected a list"),
        (
            json.dumps({**MEASURED, "alerts": [{**MEASURED["alerts"][0], "status": "x"}]}).encode(),
            "status 'x'",
        ),
        (
            json.dumps({**MEASURED, "alerts": [{**MEASURED["alerts"][0], "labels": {"a": 1}}]}).encode(),
            "string",
        ),
        (
            json.dumps({**MEASURED, "alerts": [{**MEASURED["alerts"][0], "fingerprint": ""}]}).encode(),
            "not Alertmanager's",
        ),
        (  # it names the incident's folder
            json.dumps({**MEASURED, "alerts": [{**MEASURED["alerts"][0], "fingerprint": "/../x"}]}).encode(),
            "not Alertmanager's",
        ),
    ],
)
def test_a_body_that_is_not_a_version_4_notification_is_refused_naming_why(body: bytes, why: str):
    with pytest.raises(alerts.BadPayload, match=why):
        alerts.parse(body)


# --- HTTP -------------------------------------------------------------------------------------------


def test_without_the_bearer_token_nothing_is_queued(receiver):
    r = receiver()
    for token in (None, "wrong", TOKEN + "x", ""):
        status, headers, answer = post(r.port, notification(), token=token)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer"), (token, answer)
    status, _, _ = post(r.port, notification(), headers={"Authorization": f"Basic {TOKEN}"})
    assert status == 401
    assert r.incidents() == [] and all(" 401 (" in line for line in r.log), r.log
    assert post(r.port, notification())[0] == 200
    r.settled(1)


def test_a_rotated_token_is_read_again_and_a_bad_rotation_keeps_the_last_good_one(receiver):
    r = receiver()
    assert r.server.token is not None
    path = Path(r.server.token.path)
    path.write_text("n3w\n")  # as Alertmanager's credentials_file is rotated: no restart on either side
    assert post(r.port, notification(), token=TOKEN)[0] == 401
    assert post(r.port, notification(), token="n3w")[0] == 200
    path.write_text("")  # half written
    assert post(r.port, notification(), token="n3w")[0] == 200
    assert any("is empty" in line and "the token read before stays in use" in line for line in r.log), r.log


def raw_request(port: int, head: str) -> str:
    """Send a request's head alone (no body) and read the answer's status line: a server that waited
    for the body would answer nothing before the socket's timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head.encode("latin-1"))  # as HTTP reads a header
        return s.recv(4096).decode().splitlines()[0]


def test_a_body_is_bounded_by_its_content_length_before_it_is_read(receiver):
    r = receiver()
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    big = f"POST /alerts HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 2000000\r\n\r\n"
    assert raw_request(r.port, big).split()[1] == "413"
    chunked = f"POST /alerts HTTP/1.1\r\nHost: x\r\n{auth}Transfer-Encoding: chunked\r\n\r\n"
    assert raw_request(r.port, chunked).split()[1] == "411"
    # The token is checked first: a stranger's announced gigabyte costs nothing either.
    stranger = "POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"
    assert raw_request(r.port, stranger).split()[1] == "401"
    superscript = f"POST /alerts HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: \u00b2\r\n\r\n"
    assert raw_request(r.port, superscript).split()[1] == "400"  # a digit to str.isdigit, not to int
    status, _, answer = post(r.port, b" " * 5000)  # over this receiver's 4096
    assert status == 413 and "at most 4096" in answer["error"]
    assert r.incidents() == []


def test_junk_and_other_paths_are_answered_without_work(receiver):
    r = receiver()
    assert post(r.port, b"{junk")[0] == 400
    status, _, answer = post(r.port, json.dumps({**MEASURED, "version": "3"}).encode())
    assert status == 400 and "version '3'" in answer["error"]
    connection = http.client.HTTPConnection("127.0.0.1", r.port, timeout=5)
    for method, path, expected in (("GET", "/-/ready", 200), ("GET", "/alerts", 405), ("POST", "/x", 404)):
        connection.request(method, path, b"{}" if method == "POST" else None)
        response = connection.getresponse()
        response.read()
        assert response.status == expected, (method, path)
        connection.close()
    assert r.incidents() == []


def test_a_full_queue_is_503_which_alertmanager_retries(receiver):
    r = receiver(queue_size=1, run_worker=False)  # the worker busy elsewhere: nothing leaves the queue
    assert post(r.port, notification())[0] == 200
    status, headers, _ = post(r.port, notification())
    assert status == 503 and headers["Retry-After"]


# --- the record -----------------------------------------------------------------------------------


def test_repeats_of_one_alert_are_one_incident_and_its_resolution_is_recorded_not_acted_on(receiver):
    r = receiver()
    for _ in range(3):  # Alertmanager's repeat_interval, a retry, a group re-sent for another alert
        assert post(r.port, notification())[0] == 200
    (incident,) = r.settled(1, lambda i: i.repeats == 2)
    assert incident.job_id == 77 and incident.suspect == {"host": "n2", "rank": 1}
    assert incident.alert["fingerprint"] == "6a39be9d7731f3fb" and incident.alert["receiver"] == "dyno"

    # The same alert firing again later is another firing: a new startsAt, a new incident.
    assert post(r.port, notification(alert(starts_at="2026-12-02T02:00:00Z")))[0] == 200
    r.settled(2)

    assert post(r.port, notification(alert(status="resolved")))[0] == 200

    def resolved_one() -> Optional[store.Incident]:
        now = r.records.get(incident.id)
        return now if now is not None and now.resolved_at is not None else None

    resolved = wait_until(resolved_one, 10, what="the resolution recorded")
    assert resolved.action == incident.action and len(r.incidents()) == 2
    assert "resolved" in resolved.timeline[-1][1]
    on_disk = json.loads((r.folder / incident.id / "incident.json").read_text())
    assert on_disk["resolved_at"] == resolved.resolved_at and on_disk["repeats"] == 2

    # A resolution of an alert never seen: nothing to record it on, and nothing made.
    assert post(r.port, notification(alert(fingerprint="0000", status="resolved")))[0] == 200
    wait_until(lambda: any("no incident of it" in line for line in r.log), 10, what="the unknown resolution")
    assert len(r.incidents()) == 2


def test_an_alert_for_a_job_that_is_gone_is_recorded_as_not_traced_saying_where_it_looked(receiver):
    r = receiver()
    assert post(r.port, notification())[0] == 200
    (incident,) = r.settled(1)
    assert incident.action.startswith("not traced: job 77 has no process on 127.0.0.1"), incident.action
    assert "could not be asked" in incident.action and not incident.traced
    assert any(line.startswith(f"incident {incident.id}: job 77: not traced") for line in r.log), r.log


def test_the_rate_limit_and_an_alert_without_a_job(receiver):
    r = receiver(limit="0/hour")
    assert post(r.port, notification(alert(), alert(job="", fingerprint="ffff")))[0] == 200
    found = {i.alert["fingerprint"]: i.action for i in r.settled(2)}
    assert found == {
        "6a39be9d7731f3fb": "not traced: rate limit (--max 0/hour)",
        "ffff": "not traced: the alert names no job (a job_id, job or exported_job label)",
    }


def test_an_alert_whose_job_id_or_rank_is_not_an_integer_is_refused_by_name_and_the_worker_goes_on(receiver):
    """'²' passes isdigit() and int() refuses it: the worker died on such an alert, while the webhook went
    on answering 200 queued, recording nothing, until the queue was full (503 for good)."""
    r = receiver()
    assert post(r.port, notification(alert(job="²", fingerprint="bad1")))[0] == 200
    assert post(r.port, notification(alert(rank="٣", fingerprint="bad2")))[0] == 200
    assert post(r.port, notification())[0] == 200  # a good one after them: still handled
    found = {i.alert["fingerprint"]: i.action for i in r.settled(3)}
    assert found["bad1"] == "not traced: refused: job_id '²' is not an integer"
    assert found["bad2"] == "not traced: refused: rank '٣' is not an integer"
    assert found["6a39be9d7731f3fb"].startswith("not traced: job 77 has no process"), found
    assert any("MsMonitorSlowestRank refused (job_id '²' is not an integer) firing" in line for line in r.log)


def test_a_notification_whose_handling_raises_is_logged_and_the_next_one_handled(receiver, monkeypatch):
    r = receiver()
    find = r.records.find

    def fails_once(key: object) -> None:
        monkeypatch.setattr(r.records, "find", find)
        raise OSError("the disk went away")

    monkeypatch.setattr(r.records, "find", fails_once)
    assert post(r.port, notification())[0] == 200
    wait_until(
        lambda: any("OSError: the disk went away" in line for line in r.log), 10, what="the error logged"
    )
    assert any(line.startswith("MsMonitorSlowestRank (6a39be9d7731f3fb): not handled:") for line in r.log)
    assert post(r.port, notification())[0] == 200
    (incident,) = r.settled(1)
    assert incident.action.startswith("not traced: job 77 has no process"), incident.action


def test_a_start_time_in_another_scripts_digits_is_no_time_not_an_error():
    assert alerts.epoch("٢٠٢٦-12-02T01:03:52Z") is None
    assert alerts.epoch("2026-12-02T01:03:52.5Z") == 1796173432.5


def test_alerts_of_one_job_in_one_notification_share_one_incident(receiver):
    r = receiver()
    assert post(r.port, notification(alert(rank="1"), alert(rank="2", fingerprint="2222")))[0] == 200
    (incident,) = r.settled(1)
    assert [a["labels"]["rank"] for a in incident.also_alerted] == ["2"]
    assert post(r.port, notification(alert(rank="2", fingerprint="2222")))[0] == 200  # a repeat of the second
    r.settled(1, lambda i: i.repeats == 1)


def test_an_alert_of_a_job_that_began_during_its_last_capture_is_recorded_on_that_incident(receiver):
    """Another rank (or name) of the same straggler, or a paused rank's held figures, must not trace the
    job again: the capture that was running saw it. One that began after the capture is a new incident."""
    r = receiver()
    captured = store.Incident(
        id="20261202T010353Z-job77-11111111",
        at=alerts.epoch(STARTS_AT) or 0.0,
        job_id=77,
        action="traced",
        alert={"fingerprint": "1111"},
        ended_at=(alerts.epoch(STARTS_AT) or 0.0) + 10,
    )
    r.records.add(captured, ("1111", STARTS_AT))
    during = "2026-12-02T01:03:55.5Z"  # 3 s after STARTS_AT, before the capture ended
    assert post(r.port, notification(alert(rank="2", fingerprint="2222", starts_at=during)))[0] == 200
    wait_until(lambda: r.records.get(captured.id).also_alerted, 10, what="the alert recorded on the capture")
    assert [i.id for i in r.incidents()] == [captured.id]
    assert any(line.endswith("also alerted: MsMonitorSlowestRank rank 2") for line in r.log), r.log
    assert post(r.port, notification(alert(rank="2", fingerprint="2222", starts_at=during)))[0] == 200
    wait_until(lambda: r.records.get(captured.id).repeats == 1, 10, what="its repeat counted there")

    after = "2026-12-02T01:05:00Z"
    assert post(r.port, notification(alert(rank="2", fingerprint="2222", starts_at=after)))[0] == 200
    assert len(r.settled(2)) == 2


# --- the command --------------------------------------------------------------------------------


def respond(*args: str) -> Completed:
    return dyno("respond", *args, timeout=30)


def test_the_command_refuses_an_open_listener_without_a_token_and_a_token_others_can_read(tmp_path: Path):
    common = ("--hosts-from", "slurm", "--collect", str(tmp_path / "incidents"))
    open_listener = respond("--listen", "0.0.0.0:0", *common)
    assert open_listener.returncode == 2 and "needs --token-file" in open_listener.stderr
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o644)
    loose = respond("--listen", "127.0.0.1:0", "--token-file", str(token), *common)
    assert loose.returncode == 2 and f"run: chmod 600 {token}" in loose.stderr
    token.write_text("  \n")
    token.chmod(0o600)
    empty = respond("--token-file", str(token), *common)
    assert empty.returncode == 2 and "is empty" in empty.stderr
    nowhere = respond("--hosts-from", "slurm")
    assert nowhere.returncode == 2 and "$DYNO_INCIDENTS" in nowhere.stderr


def test_the_command_serves_logs_each_notification_and_incident_and_dyno_incidents_reads_them(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")  # Alertmanager strips the file's whitespace: so does the receiver
    token.chmod(0o600)
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"127.0.0.1:{free_port()}\n")
    folder = tmp_path / "incidents"
    receiver = RespondProcess(
        ["--hosts-from", f"file:{hostfile}", "--collect", str(folder), "--token-file", str(token)],
        ["--timeout", "2"],
    ).start()
    try:
        assert post(receiver.port, notification())[0] == 200
        assert "notification firing, 1 alert(s): MsMonitorSlowestRank job 77 rank 1" in receiver.line(
            "notification"
        )
        incident_line = receiver.line("incident ")
        assert "job 77: not traced: job 77 has no process" in incident_line
    finally:
        status, rest = receiver.stop()
    assert status == 0 and "stopping" in rest
    (record,) = incident_files(folder)

    listed = dyno("--json", "incidents", "--job", "77", env={ENV: str(folder)}, timeout=30)
    assert listed.returncode == 0, listed.stderr
    (doc,) = json.loads(listed.stdout)
    assert doc == json.loads(record.read_text())
    shown = dyno("incidents", "--from", str(folder), "show", doc["id"], timeout=30)
    assert shown.returncode == 0 and f"incident {doc['id']}" in shown.stdout and "not traced" in shown.stdout
    other_job = dyno("incidents", "--from", str(folder), "--job-id", "78", timeout=30)
    assert "No incidents in" in other_job.stdout and "for job 78" in other_job.stdout


def test_the_command_refuses_an_alert_whose_job_id_is_not_an_integer_and_handles_the_next(tmp_path: Path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"127.0.0.1:{free_port()}\n")
    folder = tmp_path / "incidents"
    receiver = RespondProcess(
        ["--hosts-from", f"file:{hostfile}", "--collect", str(folder)], ["--timeout", "2"]
    )
    receiver.start()
    try:
        assert post(receiver.port, notification(alert(job="²", fingerprint="bad1")))[0] == 200
        assert "job 0: not traced: refused: job_id '²' is not an integer" in receiver.line("incident ")
        assert post(receiver.port, notification())[0] == 200
        assert "job 77: not traced: job 77 has no process" in receiver.line("incident ")
    finally:
        status, rest = receiver.stop()
    assert status == 0 and "Traceback" not in rest
    assert len(incident_files(folder)) == 2


def test_dyno_incidents_only_reads_a_responders_folder_whatever_it_finds(tmp_path: Path):
    """A reader never moves the responder's store aside nor makes one (only `dyno respond` does)."""
    damaged = tmp_path / store.DB_NAME
    damaged.write_bytes(b"not a database")
    shown = dyno("incidents", "--from", str(tmp_path), timeout=30)
    assert shown.returncode == 1 and f"cannot read {damaged}" in shown.stderr, shown.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [store.DB_NAME]
    assert damaged.read_bytes() == b"not a database"


# --- slow clients (issue 34: slowloris) ------------------------------------------------------------


def cut_kind(line: str) -> str:
    """The kind a cut request's log line was counted under (webhook._SparseLog's key)."""
    if "connection lost" in line or "body not received" in line:
        return "lost"
    if "none freed in time" in line:
        return "busy"
    if "no thread to serve it" in line:
        return "no thread"
    return line.split(": ")[2].split(" ", 1)[0]  # "127.0.0.1:4242: request: 408 (why)": the code


@pytest.mark.parametrize(
    "slots, cut_by",
    [
        (32, "503"),  # the 32: each new connection closes the oldest still sending, over and over
        (webhook.MAX_CONNECTIONS, "408"),  # today's: 40 fit, and each is cut at the deadline
    ],
)
def test_slowloris_holds_no_slot_past_the_request_deadline_and_every_real_post_gets_through(
    receiver, slots: int, cut_by: str
):
    """The attack of issue 34: with 32 slots and a 10 s timeout per read, 40 connections at a byte a second
    let 0 of 16 Alertmanager posts through. Here 40 connections trickle (a byte per 0.25 s, reconnecting at
    once when closed) at a receiver with a 1.5 s deadline: all 16 posts are queued, none waits for a slot,
    and no slow connection stays open past the deadline, whatever its bytes."""
    timeout = 1.5
    r = receiver(request_timeout=timeout, connections=slots)
    began_attack = time.monotonic()
    with Slowloris(r.port, 40, 0.25) as attack:
        wait_until(lambda: r.server.open_connections() == min(40, slots), 10, what="the slowloris connected")
        for _ in range(16):
            began = time.monotonic()
            assert post(r.port, notification())[0] == 200
            assert time.monotonic() - began < timeout  # not a wait for a deadline to free a slot
        wait_until(lambda: any(s == cut_by for s, _ in attack.closed), 10, what=f"a slowloris cut {cut_by}")
    statuses = {status for status, _ in attack.closed}
    assert statuses <= {"408", "503", "closed"}, statuses  # closed: reset, a byte of it unread
    longest = max(held for _, held in attack.closed)
    assert longest < timeout + 1.0, f"a slow connection held for {longest:.1f}s"
    assert any(f": request: {cut_by} (" in line for line in r.log), r.log[-5:]
    # The log: a line per post (and the worker's per incident), and for the cut ones at most a line per
    # kind every 10 s (_SparseLog), so at most `windows` of each kind since the attack began. Four kinds
    # can be met: 408, 503 (closed to make room), busy (no room made in time) and lost (a 408 or 503
    # being written as its connection closes, when the attack ends: a broken pipe or a reset).
    cut_lines = [line for line in r.log if line.startswith("127.0.0.1:") and ": notification " not in line]
    windows = 1 + int((time.monotonic() - began_attack) // webhook.CUT_LOG_EVERY_S)
    kinds = collections.Counter(cut_kind(line) for line in cut_lines)
    assert set(kinds) <= {"408", "503", "busy", "lost"}, cut_lines
    assert max(kinds.values()) <= windows and len(cut_lines) < len(attack.closed), cut_lines
    wait_until(lambda: r.server.open_connections() == 0, 10, what="every slot given back")
    assert len(r.incidents()) <= 1  # the 16 posts: one alert, repeated


def test_a_connection_no_thread_could_start_for_is_answered_503_and_gives_its_slot_back(
    receiver, monkeypatch
):
    """A thread that cannot start (``RuntimeError: can't start new thread``, at a process's thread limit)
    leaves no slot taken: with 2 slots, 3 such connections are answered 503 (Alertmanager retries), and
    the next post is queued at once. (Its slot used to stay taken: after 2, every post waited for room
    that never came and was answered 503.)"""
    r = receiver(connections=2)
    real = socketserver.ThreadingMixIn.process_request
    failing = [3]

    def no_thread(server: socketserver.ThreadingMixIn, request: Any, client_address: Any) -> None:
        if failing[0]:
            failing[0] -= 1
            raise RuntimeError("can't start new thread")
        real(server, request, client_address)

    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request", no_thread)
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", r.port), timeout=5) as s:
            answer = s.recv(4096)  # sent nothing: answered on accept, then closed
            assert status_of(answer) == "503" and b"Retry-After: 1" in answer, answer
    assert r.server.open_connections() == 0
    began = time.monotonic()
    assert post(r.port, notification())[0] == 200
    assert time.monotonic() - began < slow_clients.EVICT_WAIT_S  # no wait for a slot to be made
    cut = [line for line in r.log if "no thread" in line]
    assert len(cut) == 1 and "503 (no thread to serve it: can't start new thread)" in cut[0], r.log


def test_with_every_slot_taken_the_oldest_connection_still_sending_makes_room_for_a_new_one(receiver):
    r = receiver(connections=2)
    idle: List[socket.socket] = []
    try:
        for count in (1, 2):  # one after the other: the first is the older
            idle.append(socket.create_connection(("127.0.0.1", r.port), timeout=5))
            idle[-1].sendall(b"P")  # a request begun, never finished
            wait_until(lambda n=count: r.server.open_connections() == n, 5, what=f"{count} slot(s) taken")
        assert post(r.port, notification())[0] == 200
        answer = idle[0].recv(4096)  # the oldest: answered 503, which Alertmanager retries
        assert status_of(answer) == "503" and b"Retry-After: 1" in answer, answer
        idle[1].setblocking(False)
        with pytest.raises(BlockingIOError):  # the younger one still waits for its request
            idle[1].recv(1)
        assert any("request: 503 (closed for a newer connection" in line for line in r.log), r.log
    finally:
        for one in idle:
            one.close()
    wait_until(lambda: r.server.open_connections() == 0, 10, what="every slot given back")


def test_a_stranger_is_refused_401_as_its_headers_end_its_slowly_sent_body_never_read(receiver):
    r = receiver(request_timeout=30.0)
    head = b"POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"
    with socket.create_connection(("127.0.0.1", r.port), timeout=10) as s:
        for i in range(len(head)):  # a byte per send: headers trickled in, but complete
            s.sendall(head[i : i + 1])
        began = time.monotonic()
        answer = b""
        while chunk := s.recv(4096):  # to the end: the server closes, not waiting for the body
            answer += chunk
        assert (
            time.monotonic() - began < 5.0
        )  # before a byte of the gigabyte is sent; not the deadline's 30 s
        assert status_of(answer) == "401" and b"WWW-Authenticate: Bearer" in answer, answer
    wait_until(lambda: r.server.open_connections() == 0, 5, what="its slot given back")
    assert any("POST /alerts: 401 (no bearer token)" in line for line in r.log), r.log


def test_headers_beyond_64_kib_are_refused_431_as_they_cross_it(receiver):
    r = receiver()
    with socket.create_connection(("127.0.0.1", r.port), timeout=10) as s:
        s.sendall(b"POST /alerts HTTP/1.1\r\n" + b"X-Padding: " + b"x" * 70000)  # no end of headers
        assert status_of(s.recv(4096)) == "431"
    assert any("request line and headers over 64 KiB" in line for line in r.log), r.log


def test_the_command_cuts_a_request_at_its_request_timeout(tmp_path: Path):
    """`dyno respond --request-timeout`: a connection that sends nothing is answered 408 and closed."""
    assert "--request-timeout" in respond("--help").stdout
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"127.0.0.1:{free_port()}\n")
    args = ["--hosts-from", f"file:{hostfile}", "--collect", str(tmp_path / "incidents")]
    receiver = RespondProcess([*args, "--request-timeout", "0.5"]).start()
    try:
        with socket.create_connection(("127.0.0.1", receiver.port), timeout=10) as s:
            began = time.monotonic()
            s.sendall(b"POST /alerts HTTP/1.1\r\n")  # and nothing more
            assert status_of(s.recv(4096)) == "408"
            assert 0.4 < time.monotonic() - began < 5.0
        assert "request not in within 0.5s (--request-timeout)" in receiver.line(": 408 (")
        assert post(receiver.port, notification())[0] == 200  # a post in time is not cut
    finally:
        status, _ = receiver.stop()
    assert status == 0


def test_a_capture_still_running_when_the_responder_stops_is_recorded_as_not_traced(receiver, monkeypatch):
    release = threading.Event()

    def slow_hosts(*args: object) -> jobs.JobHosts:
        release.wait(20)
        raise jobs.JobGone("job 77: looked too late")

    monkeypatch.setattr(jobs, "job_hosts", slow_hosts)
    r = receiver()
    try:
        assert post(r.port, notification())[0] == 200
        (busy,) = wait_until(lambda: [i for i in r.incidents() if i.action == "tracing"], 10, what="capture")
        r.worker.stop(0.2)
        stopped = r.records.get(busy.id)
        assert stopped is not None and stopped.action == "not traced: dyno respond stopped during the capture"
    finally:
        release.set()
