"""The directory ``dyno certs`` keeps: a CA and the server and client directories it issued.

    PKI/ca/{ca.crt,ca.key,ca.crl,issued/<serial>.crt}   stays with whoever issues and revokes
    PKI/server/{ca.crt,server.crt,server.key[,ca.crl]}  copied to each daemon's --certs-dir
    PKI/client/{ca.crt,client.crt,client.key}           copied to the user's --certs-dir

Directories are 0700 and files 0600 from the moment they exist; files are replaced atomically, so a
daemon that re-reads ``ca.crl`` never sees half of one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

from msmonitor_contract.files import replacing

from . import crl as crls
from . import keys, make
from .material import CA_CERT, CA_KEY, CRL, own_files
from .policy import Role, common_name, extension, utcnow

DEFAULT_TERMS = make.Terms()


class PkiError(Exception):
    """A reason a ``dyno certs`` action cannot be done, worded for the user."""


@dataclass(frozen=True)
class LeafDir:
    role: Role
    directory: Path
    cert: x509.Certificate


@dataclass(frozen=True)
class InitResult:
    ca_dir: Path
    server: LeafDir
    client: LeafDir


@dataclass(frozen=True)
class RevokeResult:
    revoked: List[x509.Certificate]  # newly revoked by this call
    crl_path: Path
    copies: List[Path]  # server directories that received the new CRL
    next_update: dt.datetime


def make_private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask


def write_private(path: Path, data: bytes) -> None:
    """Write *data* to *path* as 0600, atomically (a reader sees the old file or the new one) and on disk
    before it replaces the old one: a key or a CRL must survive a crash whole."""
    with replacing(path, mode=0o600, sync=True) as temp:
        temp.write_bytes(data)


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: CertificateIssuerPrivateKeyTypes) -> bytes:
    return keys.pkcs8_pem(key)


@dataclass(frozen=True)
class Pki:
    root: Path

    @property
    def ca_dir(self) -> Path:
        return self.root / "ca"

    @property
    def issued_dir(self) -> Path:
        return self.ca_dir / "issued"

    @property
    def crl_path(self) -> Path:
        return self.ca_dir / CRL

    def load_ca(self, passwords: keys.PasswordSource) -> make.Issued:
        try:
            cert = x509.load_pem_x509_certificate((self.ca_dir / CA_CERT).read_bytes())
        except FileNotFoundError:
            raise PkiError(
                f"{self.ca_dir / CA_CERT}: missing; make a CA with: dyno certs init {self.root}"
            ) from None
        try:
            key = keys.load_private_key(self.ca_dir / CA_KEY, passwords)
        except keys.KeyLoadError as exc:
            raise PkiError(str(exc)) from None
        assert isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)), (
            f"{self.ca_dir / CA_KEY}: not an RSA or ECDSA key"
        )
        return make.Issued(cert, key)

    def write_leaf(self, ca: make.Issued, issued: make.Issued, role: Role, directory: Path) -> LeafDir:
        cert_name, key_name = own_files(role)
        if (directory / cert_name).exists():
            raise PkiError(f"{directory / cert_name} exists; choose another directory or remove it first")
        make_private_dir(directory)
        write_private(directory / CA_CERT, pem(ca.cert))
        write_private(directory / key_name, key_pem(issued.key))
        write_private(directory / cert_name, pem(issued.cert))
        make_private_dir(self.issued_dir)
        write_private(self.issued_dir / f"{issued.cert.serial_number:X}.crt", pem(issued.cert))
        return LeafDir(role, directory, issued.cert)

    def server_dirs(self) -> List[Path]:
        """Every directory under the root holding a server certificate: where a new CRL belongs."""
        return sorted(p for p in self.root.iterdir() if p != self.ca_dir and (p / "server.crt").exists())

    def issued(self) -> List[x509.Certificate]:
        if not self.issued_dir.is_dir():
            return []
        return [x509.load_pem_x509_certificate(p.read_bytes()) for p in sorted(self.issued_dir.glob("*.crt"))]

    def revoked_entries(self) -> List[Tuple[int, dt.datetime]]:
        if not self.crl_path.exists():
            return []
        return [(r.serial_number, r.revocation_date_utc) for r in crls.load_crl(self.crl_path)]


def init(
    root: Path,
    server_hosts: Sequence[str],
    client_name: str,
    terms: make.Terms = DEFAULT_TERMS,
    ca_days: int = 3650,
) -> InitResult:
    """A CA valid *ca_days*, and a server (for *server_hosts*) and a client certificate made on *terms*."""
    pki = Pki(root)
    if (pki.ca_dir / CA_KEY).exists():
        raise PkiError(
            f"{pki.ca_dir / CA_KEY} exists: {root} already holds a CA; add certificates with "
            f"`dyno certs issue {root}` or choose another directory"
        )
    if not server_hosts:
        raise PkiError("--server-hosts: give the names and addresses clients use to reach the daemon")
    if terms.days > ca_days:
        raise PkiError(f"--days {terms.days} is longer than the CA's --ca-days {ca_days}")
    make_private_dir(root)
    ca = make.new_ca(f"msMonitor CA {root.resolve().name}", dataclasses.replace(terms, days=ca_days))
    make_private_dir(pki.ca_dir)
    write_private(pki.ca_dir / CA_KEY, key_pem(ca.key))
    write_private(pki.ca_dir / CA_CERT, pem(ca.cert))
    server = make.new_leaf(ca, Role.SERVER, server_hosts[0], terms, server_hosts)
    client = make.new_leaf(ca, Role.CLIENT, client_name, terms)
    return InitResult(
        pki.ca_dir,
        pki.write_leaf(ca, server, Role.SERVER, root / "server"),
        pki.write_leaf(ca, client, Role.CLIENT, root / "client"),
    )


@dataclass(frozen=True)
class LeafRequest:
    """One more certificate to issue: a server (*names* are its hosts) or a client (*names* is its one
    name), and the directory it goes to (by default ``<root>/<role>-<first name>``)."""

    role: Role
    names: Sequence[str]
    out: Optional[Path] = None


def issue(
    root: Path, passwords: keys.PasswordSource, request: LeafRequest, terms: make.Terms = DEFAULT_TERMS
) -> LeafDir:
    """*request*'s certificate, made on *terms* by the CA at *root*."""
    pki = Pki(root)
    ca = pki.load_ca(passwords)
    role, names = request.role, request.names
    directory = request.out or root / f"{role.value}-{names[0]}"
    hosts = names if role is Role.SERVER else ()
    return pki.write_leaf(ca, make.new_leaf(ca, role, names[0], terms, hosts), role, directory)


def _is_client(cert: x509.Certificate) -> bool:
    usage = extension(cert, x509.ExtendedKeyUsage)
    return usage is not None and x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH in usage


def revoke(
    root: Path,
    passwords: keys.PasswordSource,
    client_names: Sequence[str] = (),
    serials: Sequence[int] = (),
    crl_days: int = 365,
) -> RevokeResult:
    """Add the named client certificates (or serials) to the CRL and write it where daemons need it.

    With no names and no serials the CRL is re-issued unchanged but with a new validity.
    """
    pki = Pki(root)
    ca = pki.load_ca(passwords)
    entries = dict(pki.revoked_entries())
    chosen = [
        c
        for c in pki.issued()
        if (_is_client(c) and common_name(c) in client_names) or c.serial_number in serials
    ]
    unknown = [n for n in client_names if not any(common_name(c) == n for c in chosen)]
    unknown += [f"serial {s:X}" for s in serials if not any(c.serial_number == s for c in chosen)]
    if unknown:
        raise PkiError(f"{pki.issued_dir}: no issued client certificate for {', '.join(unknown)}")
    now = utcnow()
    fresh = [c for c in chosen if c.serial_number not in entries]
    entries.update((c.serial_number, now) for c in fresh)
    new = crls.build_crl(ca.cert, ca.key, sorted(entries.items()), dt.timedelta(days=crl_days), now)
    data = new.public_bytes(serialization.Encoding.PEM)
    write_private(pki.crl_path, data)
    copies = pki.server_dirs()
    for directory in copies:
        write_private(directory / CRL, data)
    return RevokeResult(fresh, pki.crl_path, copies, crls.expires(new))
