"""A ``--certs-dir`` loaded and checked as a whole: trust anchors, own certificate, own key, optional CRL.

File names are msMonitor's: ``ca.crt`` and ``ca.crl`` on both sides, ``server.crt``/``server.key`` for the
daemon, ``client.crt``/``client.key`` for dyno; a CA directory holds ``ca.crt``/``ca.key``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from . import crl as crls
from . import keys
from .policy import (
    Role,
    Violation,
    check_certificate,
    check_issued_by,
    check_key_matches,
    errors,
    utcnow,
)

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
CRL = "ca.crl"
_OWN = {
    Role.CA: (CA_CERT, CA_KEY),
    Role.SERVER: ("server.crt", "server.key"),
    Role.CLIENT: ("client.crt", "client.key"),
}
_DESCRIPTION = {
    Role.CA: "the CA certificate",
    Role.SERVER: "the server certificate",
    Role.CLIENT: "the client certificate",
}


def own_files(role: Role) -> Tuple[str, str]:
    return _OWN[role]


@dataclass(frozen=True)
class Material:
    role: Role
    directory: Path
    ca_pem: bytes
    cas: Tuple[x509.Certificate, ...]
    cert_pem: bytes
    cert: x509.Certificate
    key: PrivateKeyTypes
    crl: Optional[x509.CertificateRevocationList]
    warnings: Tuple[Violation, ...] = ()

    @property
    def ca_file(self) -> str:
        return str(self.directory / CA_CERT)

    @property
    def crl_path(self) -> Path:
        return self.directory / CRL


class CertsError(Exception):
    """Violations that stop TLS from being set up; one line each."""

    def __init__(self, violations: Sequence[Violation]) -> None:
        super().__init__("\n".join(str(v) for v in violations))
        self.violations = list(violations)


def read_certificates(path: Path, what: str, found: List[Violation]) -> Tuple[bytes, List[x509.Certificate]]:
    """The PEM bytes and certificates of *path*; problems are appended to *found*."""
    try:
        pem = path.read_bytes()
    except FileNotFoundError:
        found.append(Violation(str(path), "file", "missing", f"needs {what} (PEM)"))
        return b"", []
    except OSError as exc:
        found.append(Violation(str(path), "file", exc.strerror or "unreadable", f"needs {what} (PEM)"))
        return b"", []
    try:
        return pem, x509.load_pem_x509_certificates(pem)
    except ValueError:
        found.append(Violation(str(path), "file", "not a PEM certificate", f"needs {what} (PEM)"))
        return pem, []


@dataclass
class _Inspection:
    directory: Path
    role: Role
    passwords: keys.PasswordSource
    now: dt.datetime
    strict_key: bool
    with_crl: bool = True
    found: List[Violation] = field(default_factory=list)

    def path(self, name: str) -> Path:
        return self.directory / name

    def run(self) -> Optional[Material]:
        if not self.directory.is_dir():
            cert_name, key_name = own_files(self.role)
            self.found.append(
                Violation(
                    str(self.directory),
                    "directory",
                    "missing",
                    f"needs {CA_CERT}, {cert_name} and {key_name} (dyno certs init makes them)",
                )
            )
            return None
        ca_pem, cas = self._trust_anchors()
        cert_name, key_name = own_files(self.role)
        cert_pem, certs = read_certificates(self.path(cert_name), _DESCRIPTION[self.role], self.found)
        cert = certs[0] if certs else None
        if cert is not None and self.role is not Role.CA:
            self.found += check_certificate(cert, str(self.path(cert_name)), self.role, self.now)
            if cas:
                self.found += check_issued_by(cert, str(self.path(cert_name)), cas, str(self.path(CA_CERT)))
        key = self._key(cert, cert_name, key_name)
        crl = self._crl(cas, cert, cert_name) if self.with_crl else None
        if cert is None or key is None or errors(self.found):
            return None
        return Material(
            self.role, self.directory, ca_pem, tuple(cas), cert_pem, cert, key, crl, tuple(self.found)
        )

    def _trust_anchors(self) -> Tuple[bytes, List[x509.Certificate]]:
        pem, cas = read_certificates(self.path(CA_CERT), "the CA certificate", self.found)
        for ca in cas:
            self.found += check_certificate(ca, str(self.path(CA_CERT)), Role.CA, self.now)
        return pem, cas

    def _key(
        self, cert: Optional[x509.Certificate], cert_name: str, key_name: str
    ) -> Optional[PrivateKeyTypes]:
        key_path = self.path(key_name)
        try:
            key = keys.load_private_key(key_path, self.passwords)
        except keys.KeyLoadError as exc:
            lenient = not self.strict_key and exc.problem is keys.KeyProblem.NEEDS_PASSWORD
            self.found.append(keys.unchecked(exc, cert_name) if lenient else exc.violation)
            return None
        if cert is not None:
            self.found += check_key_matches(cert, str(self.path(cert_name)), key, str(key_path))
        return key

    def _crl(
        self, cas: List[x509.Certificate], cert: Optional[x509.Certificate], cert_name: str
    ) -> Optional[x509.CertificateRevocationList]:
        path = self.path(CRL)
        if not path.exists():
            return None
        try:
            crl = crls.load_crl(path)
        except crls.CrlError as exc:
            self.found.append(exc.violation)
            return None
        self.found += crls.check_crl(crl, str(path), cas, str(self.path(CA_CERT)), self.now)
        if cert is not None:
            self.found += crls.check_not_revoked(cert, str(self.path(cert_name)), crl, str(path))
        return crl


@dataclass(frozen=True)
class Checks:
    """How a directory is inspected: at *now* (by default the moment it is); with ``strict_key=False`` an
    encrypted key without a password is a warning (``dyno certs check``); with ``with_crl=False`` the CRL
    is left to whoever follows it (the serving daemon does, per call)."""

    now: Optional[dt.datetime] = None
    strict_key: bool = True
    with_crl: bool = True


def inspect(
    directory: Path, role: Role, passwords: keys.PasswordSource, checks: Checks = Checks()
) -> Tuple[Optional[Material], List[Violation]]:
    """Everything wrong with *directory* for *role*, and the material when nothing is an error."""
    now = checks.now or utcnow()
    inspection = _Inspection(directory, role, passwords, now, checks.strict_key, checks.with_crl)
    material = inspection.run()
    return material, inspection.found


def load(directory: Path, role: Role, passwords: keys.PasswordSource, with_crl: bool = True) -> Material:
    """The material of *directory*, or :class:`CertsError` with every error found."""
    material, found = inspect(directory, role, passwords, Checks(with_crl=with_crl))
    if material is None:
        raise CertsError(errors(found) or found)
    return material


def detect(directory: Path) -> List[Tuple[Path, Role]]:
    """The certificate directories at *directory* and their roles: itself, or its subdirectories
    (the root ``dyno certs init`` made)."""

    def role_of(path: Path) -> Optional[Role]:
        for role in (Role.SERVER, Role.CLIENT, Role.CA):
            if (path / own_files(role)[0]).exists():
                return role
        return None

    own = role_of(directory)
    if own is not None:
        return [(directory, own)]
    if not directory.is_dir():
        return []
    found = [(sub, role_of(sub)) for sub in sorted(directory.iterdir()) if sub.is_dir()]
    return [(sub, role) for sub, role in found if role is not None]
