"""Alertmanager's webhook notification (payload version 4), read strictly into typed records.

A notification carries every alert of its group, firing and resolved: an alert already handled comes
again whenever the group changes, and again when Alertmanager repeats or retries. What identifies one
firing of one alert is its ``fingerprint`` (a hash of its labels) with its ``startsAt``: a resolved
notification of it, and every repeat, carry the same two.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, Mapping, Optional, Tuple

from msmonitor_contract.numbers import strict_int

VERSION = "4"
MAX_ALERTS = 1000  # Alertmanager's max_alerts truncates a group; a bound on what one body may ask of us
FIRING, RESOLVED = "firing", "resolved"
# Where an alert names its job: the rule's own label first; Prometheus renames a scraped `job` label
# to `exported_job` when the scrape config does not honor labels.
JOB_LABELS = ("job_id", "job", "exported_job")
# The daemon to reach for the suspect: the node its series came from (Kubernetes), else the host.
HOST_LABELS = ("node", "host")
# The rule's own labels, numbers or absent: one holding anything else refuses the alert (`job` and
# `exported_job` are Prometheus' scrape job names, words as often as not).
NUMBER_LABELS = ("job_id", "rank")


class BadPayload(ValueError):
    """The body is not an Alertmanager notification of version 4; the message says what is wrong."""


@dataclass(frozen=True)
class Alert:
    status: str
    labels: Dict[str, str]
    annotations: Dict[str, str]
    starts_at: str
    ends_at: str
    generator_url: str
    fingerprint: str

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def key(self) -> Tuple[str, str]:
        """One firing of one alert: repeats and its resolution share it."""
        return self.fingerprint, self.starts_at

    @property
    def started(self) -> Optional[float]:
        """``startsAt`` in seconds since the epoch; None when it is not RFC 3339 as Alertmanager writes it."""
        return epoch(self.starts_at)

    @property
    def refused(self) -> str:
        """Why this alert's numbers cannot be read ("" when they can): its job_id or rank not an integer."""
        bad = (
            k
            for k in NUMBER_LABELS
            if self.labels.get(k) and strict_int(self.labels[k], negative=True) is None
        )
        return "; ".join(f"{k} {self.labels[k][:40]!r} is not an integer" for k in bad)

    @property
    def job_id(self) -> Optional[int]:
        """The job id processes registered with; never 0, which would select every job."""
        return None if self.refused else _first_int(self.labels, JOB_LABELS) or None

    @property
    def host(self) -> str:
        return next((self.labels[k] for k in HOST_LABELS if self.labels.get(k)), "")

    @property
    def rank(self) -> Optional[int]:
        return None if self.refused else _first_int(self.labels, ("rank",))

    def to_json(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "fingerprint": self.fingerprint,
            "startsAt": self.starts_at,
            "endsAt": self.ends_at,
            "labels": self.labels,
            "annotations": self.annotations,
            "generatorURL": self.generator_url,
        }


@dataclass(frozen=True)
class Notification:
    receiver: str
    status: str
    group_key: str
    external_url: str
    truncated: int
    alerts: Tuple[Alert, ...] = field(default_factory=tuple)

    def summary(self) -> str:
        """One line: what came, for the log."""
        shown = ", ".join(_alert_words(a) for a in self.alerts[:3])
        more = f" and {len(self.alerts) - 3} more" if len(self.alerts) > 3 else ""
        return f"{self.status}, {len(self.alerts)} alert(s): {shown}{more}"


_FINGERPRINT = re.compile(r"[0-9a-fA-F]{1,16}")  # Alertmanager's: 16 hex digits of the labels' hash
# Go's RFC 3339 with nanoseconds, which datetime.fromisoformat reads only from Python 3.11. ASCII:
# a bare \d is any script's digit, which fromisoformat refuses.
_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", re.ASCII)


def epoch(stamp: str) -> Optional[float]:
    match = _RFC3339.fullmatch(stamp)
    if match is None:
        return None
    whole, fraction, zone = match.groups()
    seconds = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    return seconds + float("0." + (fraction or "0"))


def parse(body: bytes) -> Notification:
    """*body* as a notification; :class:`BadPayload` naming the first thing wrong."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadPayload(f"not JSON: {exc}") from None
    except RecursionError:  # arrays in arrays, a few hundred thousand deep, fit in a small body
        raise BadPayload("nested too deep to be a notification") from None
    doc = _object(data, "the body")
    if doc.get("version") != VERSION:
        raise BadPayload(f"version {doc.get('version')!r}: only Alertmanager's webhook version 4 is read")
    alerts = doc.get("alerts")
    if not isinstance(alerts, list):
        raise BadPayload("alerts: expected a list")
    if len(alerts) > MAX_ALERTS:
        raise BadPayload(f"{len(alerts)} alerts: at most {MAX_ALERTS} in one notification (max_alerts)")
    truncated = doc.get("truncatedAlerts", 0)
    if not isinstance(truncated, int):
        raise BadPayload("truncatedAlerts: expected a number")
    return Notification(
        receiver=_text(doc, "receiver"),
        status=_status(doc, "the body"),
        group_key=_text(doc, "groupKey"),
        external_url=_text(doc, "externalURL"),
        truncated=truncated,
        alerts=tuple(_alert(a, i) for i, a in enumerate(alerts)),
    )


def _alert(data: Any, index: int) -> Alert:
    where = f"alerts[{index}]"
    doc = _object(data, where)
    fingerprint = _text(doc, "fingerprint", where)
    if not _FINGERPRINT.fullmatch(fingerprint):  # it names the incident's folder: nothing else gets in
        raise BadPayload(f"{where}.fingerprint: {fingerprint[:40]!r} is not Alertmanager's (hex, 16 at most)")
    return Alert(
        status=_status(doc, where),
        labels=_strings(doc.get("labels", {}), f"{where}.labels"),
        annotations=_strings(doc.get("annotations", {}), f"{where}.annotations"),
        starts_at=_text(doc, "startsAt", where),
        ends_at=_text(doc, "endsAt", where),
        generator_url=_text(doc, "generatorURL", where),
        fingerprint=fingerprint,
    )


def _object(data: Any, where: str) -> Dict[str, Any]:
    if not isinstance(data, dict):
        raise BadPayload(f"{where}: expected an object")
    return data


def _text(doc: Mapping[str, Any], key: str, where: str = "") -> str:
    value = doc.get(key, "")
    if not isinstance(value, str):
        raise BadPayload(f"{where + '.' if where else ''}{key}: expected a string")
    return value


def _status(doc: Mapping[str, Any], where: str) -> str:
    status = doc.get("status")
    if status not in (FIRING, RESOLVED):
        raise BadPayload(f"{where}: status {status!r}, expected firing or resolved")
    return str(status)


def _strings(data: Any, where: str) -> Dict[str, str]:
    doc = _object(data, where)
    if not all(isinstance(v, str) for v in doc.values()):
        raise BadPayload(f"{where}: every value must be a string")
    return dict(doc)


def _first_int(labels: Mapping[str, str], keys: Tuple[str, ...]) -> Optional[int]:
    for key in keys:
        number = strict_int(labels.get(key, ""))
        if number is not None:
            return number
    return None


def _alert_words(alert: Alert) -> str:
    if alert.refused:
        return f"{alert.name or '(no alertname)'} refused ({alert.refused}) {alert.status}"
    job = f" job {alert.job_id}" if alert.job_id is not None else ""
    rank = f" rank {alert.rank}" if alert.rank is not None else ""
    return f"{alert.name or '(no alertname)'}{job}{rank} {alert.status}"
