"""Incidents on disk: a small SQLite file beside the daemon's log, so they survive a restart.

Each incident is one row: its JSON document, and the columns the rate limits query. WAL, so that a
reader (``sqlite3`` by hand) never blocks the daemon; the connection is closed explicitly at stop. A file
that is not a readable store (random bytes, a folder at the path) is moved aside with a warning and a new
one started: incidents are a record, and losing them must not keep the daemon from starting.
"""

from __future__ import annotations

import json
import logging
from typing import List, Optional

from msmonitor_contract.files import open_sqlite

from .incident import Incident

log = logging.getLogger("dynolog.incidents")

MAX_KEPT = 10_000  # the oldest are deleted beyond this
DAY_S = 86_400.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    job_id INTEGER NOT NULL,
    host_pid INTEGER NOT NULL,
    traced INTEGER NOT NULL,
    doc TEXT NOT NULL
)
"""


class IncidentStore:
    def __init__(self, path: str) -> None:
        self._db = open_sqlite(path, (_SCHEMA,), log, "incidents store")

    def add(self, incident: Incident) -> Incident:
        cursor = self._db.execute(
            "INSERT INTO incidents (at, job_id, host_pid, traced, doc) VALUES (?, ?, ?, ?, '{}')",
            (incident.at, incident.job_id, incident.host_pid, incident.traced),
        )
        assert cursor.lastrowid is not None
        incident.id = cursor.lastrowid
        self._db.execute("DELETE FROM incidents WHERE id <= ?", (incident.id - MAX_KEPT,))
        self.update(incident)
        return incident

    def update(self, incident: Incident) -> None:
        self._db.execute(
            "UPDATE incidents SET traced = ?, doc = ? WHERE id = ?",
            (incident.traced, json.dumps(incident.to_dict()), incident.id),
        )
        self._db.commit()

    def get(self, incident_id: int) -> Optional[Incident]:
        row = self._db.execute("SELECT doc FROM incidents WHERE id = ?", (incident_id,)).fetchone()
        return Incident.from_dict(json.loads(row[0])) if row else None

    def list(self, job_id: int = 0, limit: int = 0) -> List[Incident]:
        """Oldest first; *limit*: the most recent this many."""
        rows = self._db.execute(
            "SELECT doc FROM (SELECT id, doc FROM incidents WHERE ? IN (0, job_id) ORDER BY id DESC LIMIT ?) "
            "ORDER BY id",
            (job_id, limit or -1),
        ).fetchall()
        return [Incident.from_dict(json.loads(doc)) for (doc,) in rows]

    def last_traced_at(self, host_pid: int) -> Optional[float]:
        row = self._db.execute(
            "SELECT MAX(at) FROM incidents WHERE host_pid = ? AND traced", (host_pid,)
        ).fetchone()
        return row[0] if row else None

    def traced_since(self, job_id: int, since: float) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM incidents WHERE job_id = ? AND traced AND at >= ?", (job_id, since)
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()
