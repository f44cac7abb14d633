"""Certificates for tests, good and bad, built with the same blocks as ``dyno certs`` (dynocerts.make).

A bad variant is a good one with one thing changed: an extension dropped or replaced, a weak key, a
validity window in the past or future, a SHA-1 signature. Keys are EC P-256 unless a test needs RSA
(RSA-3072 keygen is slow on small machines: the fixtures make it once per session).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence, Type, TypedDict, Union

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

from dynocerts import crl, make
from dynocerts.make import Extension, Issued
from dynocerts.policy import Role

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own is 3.11+; only annotations use it

HOSTS = ("localhost", "127.0.0.1")
DAY = dt.timedelta(days=1)


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def key(key_type: str = "ec-p256") -> CertificateIssuerPrivateKeyTypes:
    if key_type == "rsa2048":  # below the policy: only tests make these
        return rsa.generate_private_key(65537, 2048)
    return make.generate_key(key_type)


def _public(k: CertificateIssuerPrivateKeyTypes) -> Union[ec.EllipticCurvePublicKey, rsa.RSAPublicKey]:
    """The public half, as make takes it: :func:`key` makes EC and RSA keys only."""
    public = k.public_key()
    assert isinstance(public, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey)), type(public)
    return public


def authority(
    key_type: str = "ec-p256", cn: str = "Test CA", drop: Sequence[Type[x509.ExtensionType]] = ()
) -> Issued:
    k = key(key_type)
    exts = [e for e in make.extensions(Role.CA, _public(k), _public(k)) if type(e[0]) not in drop]
    subject = make.name(cn)
    start = now() - dt.timedelta(minutes=5)
    validity = make.Validity(start, start + 365 * DAY)
    return Issued(make.certificate(subject, _public(k), make.Signer(subject, k), exts, validity), k)


class Unusual(TypedDict, total=False):
    """What a test may make unusual about a :func:`leaf`, most often to break one rule with it."""

    private_key: Optional[CertificateIssuerPrivateKeyTypes]  # default: a new P-256 key
    hosts: Sequence[str]  # a server's names (default HOSTS)
    not_before: Optional[dt.datetime]  # default: five minutes ago
    not_after: Optional[dt.datetime]  # default: a year after not_before
    drop: Sequence[Type[x509.ExtensionType]]  # extensions left out
    replace: Sequence[Extension]  # extensions given instead of the policy's
    digest: Optional[make.Digest]


def leaf(ca: Issued, role: Role, cn: str, **unusual: Unpack[Unusual]) -> Issued:
    """A certificate for *role* issued by *ca*, as the policy wants it but for what is *unusual*."""
    k = unusual.get("private_key") or key()
    hosts = unusual.get("hosts", HOSTS) if role is Role.SERVER else ()
    drop, replace = unusual.get("drop", ()), unusual.get("replace", ())
    replaced = {type(e) for e, _ in replace}
    exts = make.extensions(role, _public(k), _public(ca.key), hosts)
    exts = [e for e in exts if type(e[0]) not in drop and type(e[0]) not in replaced] + list(replace)
    start = unusual.get("not_before") or now() - dt.timedelta(minutes=5)
    signer = make.Signer(ca.cert.subject, ca.key, unusual.get("digest"))
    validity = make.Validity(start, unusual.get("not_after") or start + 365 * DAY)
    cert = make.certificate(make.name(cn), _public(k), signer, exts, validity)
    return Issued(cert, k)


# DER of sha256WithRSAEncryption and sha1WithRSAEncryption: same length, so the swap keeps every
# enclosing length valid.
_SHA256_RSA = bytes.fromhex("2a864886f70d01010b")
_SHA1_RSA = bytes.fromhex("2a864886f70d010105")


def with_sha1_signature(cert: x509.Certificate, issuer_key: rsa.RSAPrivateKey) -> x509.Certificate:
    """*cert* re-signed with SHA-1 (cryptography refuses to make one; real CAs still did, long ago)."""
    der = cert.public_bytes(serialization.Encoding.DER)
    tbs = cert.tbs_certificate_bytes
    new_tbs = tbs.replace(_SHA256_RSA, _SHA1_RSA)
    signature = issuer_key.sign(new_tbs, padding.PKCS1v15(), hashes.SHA1())
    assert len(signature) == len(cert.signature)
    der = der.replace(tbs, new_tbs).replace(_SHA256_RSA, _SHA1_RSA).replace(cert.signature, signature)
    return x509.load_der_x509_certificate(der)


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(
    k: CertificateIssuerPrivateKeyTypes, password: Optional[bytes] = None, pkcs1: bool = False
) -> bytes:
    """PKCS#8 (``BEGIN PRIVATE KEY``) or PKCS#1/SEC1 traditional (``BEGIN RSA/EC PRIVATE KEY``)."""
    fmt = serialization.PrivateFormat.TraditionalOpenSSL if pkcs1 else serialization.PrivateFormat.PKCS8
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return k.private_bytes(serialization.Encoding.PEM, fmt, enc)


def write(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


@dataclass(frozen=True)
class CertsDir:
    path: Path
    role: Role

    @property
    def cert(self) -> Path:
        return self.path / f"{self.role.value}.crt"

    @property
    def key(self) -> Path:
        return self.path / f"{self.role.value}.key"

    @property
    def ca(self) -> Path:
        return self.path / "ca.crt"

    @property
    def crl(self) -> Path:
        return self.path / "ca.crl"

    def __str__(self) -> str:
        return str(self.path)


class Written(TypedDict, total=False):
    """How :func:`certs_dir` writes the folder, where a test wants it otherwise."""

    password: Optional[bytes]  # the key encrypted with it
    pkcs1: bool  # the key in the traditional form (BEGIN RSA/EC PRIVATE KEY), not PKCS#8
    key_mode: int  # the key file's permissions (default 0o600)
    trust: Optional[Issued]  # the CA in ca.crt (default: the issuer)


def certs_dir(path: Path, role: Role, ca: Issued, own: Issued, **written: Unpack[Written]) -> CertsDir:
    """A --certs-dir for *role*: ca.crt, the certificate *own* (issued by *ca*) and its key."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    out = CertsDir(path, role)
    write(out.ca, pem((written.get("trust") or ca).cert))
    write(out.cert, pem(own.cert))
    key_file = key_pem(own.key, written.get("password"), written.get("pkcs1", False))
    write(out.key, key_file, written.get("key_mode", 0o600))
    return out


def revocation_list(
    ca: Issued,
    revoked: Sequence[x509.Certificate] = (),
    lifetime: dt.timedelta = 90 * DAY,
    last_update: Optional[dt.datetime] = None,
) -> bytes:
    issued_at = last_update or now()
    made = crl.build_crl(
        ca.cert, ca.key, [(c.serial_number, issued_at) for c in revoked], lifetime, issued_at
    )
    return made.public_bytes(serialization.Encoding.PEM)
