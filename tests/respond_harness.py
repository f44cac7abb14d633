"""``dyno respond`` for tests: notifications as Alertmanager 0.25 sends them, POSTed the way it does, the
receiver as a real ``dyno respond`` process, and a slowloris to hold its connections (issue 34).

The measured body below is what Alertmanager 0.25.0 POSTed to a webhook (docs/respond.md): version 4,
every alert of the group, ``Authorization: Bearer <credentials_file>``, a Content-Length always set.
"""

from __future__ import annotations

import copy
import http.client
import json
import select
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, TypedDict

from harness import Dyno, read_until, rest_of_output, stop_process

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own is 3.11+; only annotations use it

TOKEN = "s3cret"
STARTS_AT = "2026-12-02T01:03:52.509324779Z"
NEVER = "0001-01-01T00:00:00Z"
MEASURED: Dict[str, Any] = {
    "receiver": "dyno",
    "status": "firing",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "MsMonitorSlowestRank", "host": "n2", "job_id": "77", "rank": "1"},
            "annotations": {"summary": "x"},
            "startsAt": STARTS_AT,
            "endsAt": NEVER,
            "generatorURL": "http://prom/graph",
            "fingerprint": "6a39be9d7731f3fb",
        }
    ],
    "groupLabels": {"alertname": "MsMonitorSlowestRank", "job_id": "77"},
    "commonLabels": {"alertname": "MsMonitorSlowestRank", "host": "n2", "job_id": "77", "rank": "1"},
    "commonAnnotations": {"summary": "x"},
    "externalURL": "http://vm:19093",
    "version": "4",
    "groupKey": '{}:{alertname="MsMonitorSlowestRank", job_id="77"}',
    "truncatedAlerts": 0,
}


class AlertFields(TypedDict, total=False):
    """What sets one alert apart from the measured one (the default of each)."""

    job: str  # "77"; an empty one leaves the job_id label out
    rank: str  # "1"
    host: str  # "n2"
    fingerprint: str  # "6a39be9d7731f3fb"
    status: str  # "firing"
    starts_at: str  # STARTS_AT


def alert(**fields: Unpack[AlertFields]) -> Dict[str, Any]:
    """One alert of the measured kind, but for *fields*."""
    one = copy.deepcopy(MEASURED["alerts"][0])
    status = fields.get("status", "firing")
    labels = {
        "alertname": "MsMonitorSlowestRank",
        "host": fields.get("host", "n2"),
        "job_id": fields.get("job", "77"),
        "rank": fields.get("rank", "1"),
    }
    one.update(
        labels={k: v for k, v in labels.items() if v},
        status=status,
        fingerprint=fields.get("fingerprint", "6a39be9d7731f3fb"),
        startsAt=fields.get("starts_at", STARTS_AT),
        endsAt=NEVER if status == "firing" else "2026-12-02T01:09:52.509Z",
    )
    return one


def notification(*alerts: Dict[str, Any]) -> bytes:
    """A notification of these alerts (the measured one's alert when none), as Alertmanager words it."""
    body = copy.deepcopy(MEASURED)
    if alerts:
        body["alerts"] = list(alerts)
        body["status"] = "firing" if any(a["status"] == "firing" for a in alerts) else "resolved"
    return json.dumps(body).encode()


def post(
    port: int, body: bytes, token: Optional[str] = TOKEN, headers: Optional[Dict[str, str]] = None
) -> Tuple[int, Dict[str, str], Dict[str, Any]]:
    """POST *body* to the receiver as Alertmanager does: status, headers, the JSON answer."""
    sent = {"Content-Type": "application/json", "User-Agent": "Alertmanager/0.25.0"}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/alerts", body, {**sent, **(headers or {})})
        response = connection.getresponse()
        answer = json.loads(response.read() or b"{}")
        return response.status, dict(response.getheaders()), answer
    finally:
        connection.close()


@dataclass
class RespondProcess:
    """A real ``dyno respond`` (``dyno`` *global_args* ``respond --listen 127.0.0.1:0`` *args*): started,
    its port read from its first line, stopped with SIGTERM."""

    args: Sequence[str]
    global_args: Sequence[str] = ()
    proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
    port: int = 0
    lines: List[str] = field(default_factory=list)

    def start(self) -> RespondProcess:
        command = Dyno(self.global_args).command("respond", "--listen", "127.0.0.1:0", *self.args)
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        listening = read_line_until_containing(self.proc, "listening on http://", 30)
        self.port = int(listening.split("listening on http://127.0.0.1:")[1].split("/")[0])
        return self

    def line(self, containing: str, timeout: float = 30.0) -> str:
        """The next line of its log that contains *containing*."""
        assert self.proc is not None
        found = read_line_until_containing(self.proc, containing, timeout)
        self.lines.append(found)
        return found

    def stop(self) -> Tuple[int, str]:
        """SIGTERM; its exit status and the rest of its log."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rest = rest_of_output(self.proc, 40)
        return stop_process(self.proc), rest


def read_line_until_containing(proc: subprocess.Popen, text: str, timeout: float) -> str:  # type: ignore[type-arg]
    """The responder's lines start with a time stamp: read until one holds *text*."""

    def holding(line: str) -> Optional[str]:
        return line.strip() if line.startswith("20") and text in line else None

    return read_until(proc, holding, timeout, f"log line holding {text!r}")


def incident_files(folder: Path) -> List[Path]:
    return sorted(folder.glob("*/incident.json"))


# --- slow clients (issue 34: slowloris) -----------------------------------------------------------

# A request that never ends: its bytes go out one at a time, an Authorization header with no end.
NEVER_ENDS = b"POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"x" * 60000


def status_of(answer: bytes) -> str:
    """The status code of an answer's first line; "closed" for none (end of file, or a reset)."""
    parts = answer.split(b" ", 2)
    return parts[1].decode() if answer.startswith(b"HTTP/") and len(parts) > 1 else "closed"


def trickle(s: socket.socket, period: float, stop: threading.Event) -> Optional[str]:
    """Send NEVER_ENDS a byte per *period* until the server answers or closes (its status), or *stop*."""
    for i in range(len(NEVER_ENDS)):
        try:
            s.sendall(NEVER_ENDS[i : i + 1])
            # Pacing, and the wait for the server's answer: readable once it answers or closes.
            if select.select([s], [], [], period)[0]:
                return status_of(s.recv(4096))
        except OSError:  # reset: the server closed it with a byte of ours unread
            return "closed"
        if stop.is_set():
            return None
    return None


@dataclass
class Slowloris:
    """*count* threads, each holding a connection that sends a byte per *period* and never ends its request,
    opening another as soon as the server closes one; each closed one recorded (status, seconds open)."""

    port: int
    count: int
    period: float
    stop: threading.Event = field(default_factory=threading.Event)
    closed: List[Tuple[str, float]] = field(default_factory=list)
    threads: List[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Slowloris:
        self.threads = [threading.Thread(target=self._attack) for _ in range(self.count)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)
        assert not any(t.is_alive() for t in self.threads)

    def _attack(self) -> None:
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            except OSError:  # refused, or the backlog full: tried again, as an attacker would
                self.stop.wait(self.period)
                continue
            with s:
                began = time.monotonic()
                status = trickle(s, self.period, self.stop)
                if status is not None:
                    self.closed.append((status, time.monotonic() - began))
