"""Certificate revocation lists: check one, make one, and follow one on disk while serving.

gRPC's Python API cannot hand a CRL to its TLS stack, so the daemon checks the peer certificate against
the CRL on every RPC instead (see ``dynolog.edge.auth``); :class:`RevocationWatch` re-reads the file whenever
it changes, so a revocation takes effect without a restart.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

from .files import Stamp, file_stamp
from .policy import RENEW_WITHIN, Severity, Violation, utcnow, when

log = logging.getLogger("dynocerts.crl")

# A CRL without nextUpdate is trusted this long after thisUpdate (as msMonitor's dyno does).
DEFAULT_LIFETIME = dt.timedelta(days=365)


class CrlError(Exception):
    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


def load_crl(path: Path) -> x509.CertificateRevocationList:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CrlError(
            Violation(str(path), "file", exc.strerror or "unreadable", "needs a PEM CRL")
        ) from None
    try:
        return x509.load_pem_x509_crl(data)
    except ValueError:
        raise CrlError(
            Violation(str(path), "file", "not a PEM certificate revocation list", "needs a PEM CRL")
        ) from None


def expires(crl: x509.CertificateRevocationList) -> dt.datetime:
    return crl.next_update_utc or crl.last_update_utc + DEFAULT_LIFETIME


def check_crl(
    crl: x509.CertificateRevocationList,
    file: str,
    cas: Sequence[x509.Certificate],
    ca_file: str,
    now: Optional[dt.datetime] = None,
) -> List[Violation]:
    now = now or utcnow()
    found = []
    if not any(crl.issuer == ca.subject and crl.is_signature_valid(ca.public_key()) for ca in cas):  # type: ignore[arg-type]
        found.append(
            Violation(
                file,
                "signature",
                f"not signed by the CA in {ca_file} (issuer '{crl.issuer.rfc4514_string()}')",
                f"needs a CRL issued by the CA in {ca_file}",
            )
        )
    end = expires(crl)
    if now < crl.last_update_utc:
        found.append(
            Violation(
                file, "thisUpdate", f"in the future ({when(crl.last_update_utc)})", "needs correct clocks"
            )
        )
    elif now > end:
        found.append(
            Violation(
                file,
                "nextUpdate",
                f"expired on {when(end)}",
                "needs a fresh CRL from the CA (dyno certs crl)",
            )
        )
    elif end - now < RENEW_WITHIN:
        found.append(
            Violation(
                file,
                "nextUpdate",
                f"expires in {(end - now).days} days, on {when(end)}",
                "needs a fresh CRL before then (dyno certs crl)",
                Severity.WARNING,
            )
        )
    return found


def check_not_revoked(
    cert: x509.Certificate, cert_file: str, crl: x509.CertificateRevocationList, crl_file: str
) -> List[Violation]:
    entry = crl.get_revoked_certificate_by_serial_number(cert.serial_number)
    if entry is None:
        return []
    return [
        Violation(
            cert_file,
            "serial",
            f"{cert.serial_number:X} was revoked on {when(entry.revocation_date_utc)} (listed in {crl_file})",
            "needs a new certificate (dyno certs issue)",
        )
    ]


def build_crl(
    ca: x509.Certificate,
    ca_key: CertificateIssuerPrivateKeyTypes,
    revoked: Iterable[Tuple[int, dt.datetime]],
    lifetime: dt.timedelta,
    now: Optional[dt.datetime] = None,
) -> x509.CertificateRevocationList:
    now = now or utcnow()
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.subject)
        .last_update(now)
        .next_update(now + lifetime)
    )
    for serial, date in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(date).build()
        )
    return builder.sign(ca_key, hashes.SHA256())


@dataclass(frozen=True)
class CrlState:
    crl: Optional[x509.CertificateRevocationList] = None
    problem: Optional[str] = None  # set: the file is there but cannot be trusted


class RevocationWatch:
    """The CRL at *path* as it is now on disk; re-read when its inode, size or mtime changes.

    An unusable CRL (unparseable, not from our CA, expired) fails closed: every client is refused with
    the reason until it is fixed. A missing file means no revocations. The trusted CAs may change while
    serving (:meth:`trust`): the CRL is then checked again against the new ones.
    """

    def __init__(self, path: Path, cas: Sequence[x509.Certificate], ca_file: str) -> None:
        self.path = path
        self._cas = tuple(cas)
        self._ca_file = ca_file
        self._stamp: Stamp = None
        self._stale = True  # the state does not reflect the file and CAs yet
        self._state = CrlState()
        self._lock = threading.Lock()

    def trust(self, cas: Sequence[x509.Certificate]) -> None:
        """Check the CRL against these CAs from now on (a reloaded ``ca.crt``)."""
        with self._lock:
            if tuple(cas) != self._cas:
                self._cas, self._stale = tuple(cas), True

    def state(self, now: Optional[dt.datetime] = None) -> CrlState:
        stamp = file_stamp(self.path)
        with self._lock:
            if stamp != self._stamp or self._stale:
                self._state = self._load(stamp)
                self._stamp, self._stale = stamp, False
            state = self._state
        if state.crl is not None and (now or utcnow()) > expires(state.crl):
            return CrlState(state.crl, f"{self.path} expired on {when(expires(state.crl))}")
        return state

    def revocation(self, serial: int, now: Optional[dt.datetime] = None) -> Optional[str]:
        """Why a peer with this serial must be refused, or None."""
        state = self.state(now)
        if state.problem is not None:
            return (
                f"the daemon cannot check revocation ({state.problem}); "
                "every client is refused until it is fixed"
            )
        entry = state.crl.get_revoked_certificate_by_serial_number(serial) if state.crl else None
        if entry is None:
            return None
        return f"revoked on {when(entry.revocation_date_utc)} (listed in the daemon's {self.path.name})"

    def _load(self, stamp: Stamp) -> CrlState:
        if stamp is None:
            if self._stamp is not None:
                log.warning("%s was removed: no certificate is treated as revoked now", self.path)
            return CrlState()
        try:
            crl = load_crl(self.path)
        except CrlError as exc:
            log.error("%s; refusing every client until it is fixed", exc)
            return CrlState(problem=str(exc.violation))
        bad = [v for v in check_crl(crl, str(self.path), self._cas, self._ca_file) if v.field == "signature"]
        if bad:
            log.error("%s; refusing every client until it is fixed", bad[0])
            return CrlState(problem=str(bad[0]))
        log.info(
            "loaded %s: %d revoked certificates, valid until %s", self.path, len(crl), when(expires(crl))
        )
        return CrlState(crl)
