"""The responder's record: one incident per alert, in ``DIR/incidents.sqlite`` and ``DIR/<id>/incident.json``.

``DIR`` is ``dyno respond --collect``; ``dyno incidents --from DIR`` (or ``$DYNO_INCIDENTS``) reads it.
Each incident is a row holding its JSON document, and each alert that led to it (fingerprint and
startsAt: one firing) is a row pointing at it, so a repeat finds its incident. WAL, so a reader never
blocks the responder. The same document is written beside the incident's traces (a temporary file
renamed into place: a reader never sees half of it). A file that is not a readable store is moved
aside with a warning and a new one started: losing the record must not stop the responder.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from msmonitor_contract.files import open_sqlite, replacing
from msmonitor_contract.numbers import strict_int
from msmonitor_contract.values import FlagValueError

from ..exits import EXIT_USAGE, CliError
from . import ENV

log = logging.getLogger("dyno.respond")  # unconfigured, a warning reaches stderr as it is

DB_NAME = "incidents.sqlite"
RECORD_NAME = "incident.json"
TRACED = "traced"
WINDOWS = {"minute": 60.0, "hour": 3600.0, "day": 86400.0}

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS incidents (
        id TEXT PRIMARY KEY, at REAL NOT NULL, job_id INTEGER NOT NULL, traced INTEGER NOT NULL,
        doc TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS alerts (
        fingerprint TEXT NOT NULL, starts_at TEXT NOT NULL, incident TEXT NOT NULL,
        PRIMARY KEY (fingerprint, starts_at))""",
)


class RateLimit(NamedTuple):
    """``--max``: at most *most* traced incidents in any *window_s* (counted in the store)."""

    most: int
    window_s: float
    text: str  # as the user wrote it: 2/hour


def rate_limit(text: str) -> RateLimit:
    """``--max``'s value: ``N/minute``, ``N/hour`` or ``N/day`` (a flag's type)."""
    count, _, per = text.partition("/")
    most = strict_int(count)
    if most is None or per not in WINDOWS:
        raise FlagValueError(f"expected N/minute, N/hour or N/day, e.g. 2/hour; got {text!r}")
    return RateLimit(most, WINDOWS[per], text)


@dataclass
class Incident:
    """One alert's incident, as ``incident.json`` holds it (field names are the document's keys)."""

    id: str
    at: float
    job_id: int  # 0: the alert named no job
    action: str  # "tracing", "traced", "traced partly: why", "dry run", or "not traced: why"
    alert: Dict[str, Any]
    suspect: Dict[str, Any] = field(default_factory=dict)  # host and rank the alert named
    also_alerted: List[Dict[str, Any]] = field(default_factory=list)  # other alerts this capture served
    hosts_from: str = ""
    hosts: List[str] = field(default_factory=list)
    steps: Dict[str, int] = field(default_factory=dict)  # start, stop (exclusive)
    iterations: int = 0
    trace_dir: str = ""  # relative to the incident's folder
    hta_ranks: List[int] = field(default_factory=list)
    ranks: List[Dict[str, Any]] = field(default_factory=list)
    analysis: Optional[Dict[str, Any]] = None
    request: Optional[Dict[str, Any]] = None  # the trace request, as sent (or, in a dry run, not)
    ended_at: Optional[float] = None  # when its capture (or the decision not to) was over
    resolved_at: Optional[float] = None
    repeats: int = 0
    timeline: List[Tuple[float, str]] = field(default_factory=list)

    @property
    def traced(self) -> bool:
        return self.action.startswith(TRACED)  # "traced", or "traced partly: why"

    def note(self, what: str) -> None:
        self.timeline.append((time.time(), what))

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> Incident:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in known})


def folder_from(given: Optional[str], flag: str) -> str:
    """The incidents folder: *given* (the flag), else ``$DYNO_INCIDENTS``; a usage error naming both."""
    folder = given or os.environ.get(ENV, "")
    if not folder:
        raise CliError(f"{flag} DIR or ${ENV}: the folder of the responder's incidents", EXIT_USAGE)
    return os.path.abspath(folder)


class JobIncidentStore:
    def __init__(self, folder: str, reader: bool = False) -> None:
        """The responder's store (made, or moved aside when unreadable); a *reader* (``dyno incidents``)
        opens it read-only and changes nothing, whatever it finds."""
        self.folder = folder
        self._lock = threading.Lock()  # the responder's worker writes; a test or reader may look
        path = os.path.join(folder, DB_NAME)
        if reader:
            try:
                self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
                self._db.execute("SELECT COUNT(*) FROM incidents").fetchone()
            except sqlite3.Error as exc:
                raise CliError(f"cannot read {path}: {exc}") from None
            return
        os.makedirs(folder, exist_ok=True)
        self._db = open_sqlite(path, _SCHEMA, log, "dyno respond: incidents store", shared=True)

    def incident_dir(self, incident_id: str) -> str:
        return os.path.join(self.folder, incident_id)

    def add(self, incident: Incident, key: Tuple[str, str]) -> None:
        """A new incident, and the alert (one firing) it answers; both in one transaction."""
        doc = incident.to_json()
        with self._lock:
            self._db.execute(
                "INSERT INTO incidents (id, at, job_id, traced, doc) VALUES (?, ?, ?, ?, ?)",
                (incident.id, incident.at, incident.job_id, incident.traced, json.dumps(doc)),
            )
            self._attach(key, incident.id)
            self._write(incident.id, doc)
            self._db.commit()

    def attach(self, key: Tuple[str, str], incident_id: str) -> None:
        """Another alert (one firing) that *incident_id* answered: its repeats find that incident."""
        with self._lock:
            self._attach(key, incident_id)
            self._db.commit()

    def find(self, key: Tuple[str, str]) -> Optional[Incident]:
        with self._lock:
            row = self._db.execute(
                "SELECT doc FROM incidents JOIN alerts ON alerts.incident = incidents.id "
                "WHERE fingerprint = ? AND starts_at = ?",
                key,
            ).fetchone()
        return Incident.from_json(json.loads(row[0])) if row else None

    def update(self, incident: Incident) -> None:
        """The row and ``incident.json`` both, from *incident* as it stands (the file first: whoever
        sees the row can read the file as new)."""
        doc = incident.to_json()
        with self._lock:
            self._db.execute(
                "UPDATE incidents SET traced = ?, doc = ? WHERE id = ?",
                (incident.traced, json.dumps(doc), incident.id),
            )
            self._write(incident.id, doc)
            self._db.commit()

    def get(self, incident_id: str) -> Optional[Incident]:
        with self._lock:
            row = self._db.execute("SELECT doc FROM incidents WHERE id = ?", (incident_id,)).fetchone()
        return Incident.from_json(json.loads(row[0])) if row else None

    def list(self, job_id: int = 0, limit: int = 0) -> List[Incident]:
        """Oldest first; *limit*: the most recent this many; *job_id* 0: every job."""
        with self._lock:
            rows = self._db.execute(
                "SELECT doc FROM (SELECT at, id, doc FROM incidents WHERE ? IN (0, job_id) "
                "ORDER BY at DESC, id DESC LIMIT ?) ORDER BY at, id",
                (job_id, limit or -1),
            ).fetchall()
        return [Incident.from_json(json.loads(doc)) for (doc,) in rows]

    def traced_since(self, since: float) -> int:
        with self._lock:
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM incidents WHERE traced AND at >= ?", (since,)
            ).fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:  # not under a write of the worker's
            self._db.close()

    def _write(self, incident_id: str, doc: Dict[str, Any]) -> None:
        _write_atomically(os.path.join(self.incident_dir(incident_id), RECORD_NAME), doc)

    def _attach(self, key: Tuple[str, str], incident_id: str) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO alerts (fingerprint, starts_at, incident) VALUES (?, ?, ?)",
            (*key, incident_id),
        )


def _write_atomically(path: str, doc: Dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with replacing(Path(path)) as temp:
        temp.write_text(json.dumps(doc, indent=1))
