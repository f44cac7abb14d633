"""New keys and certificates that pass :mod:`dynocerts.policy` by construction.

The building blocks (:func:`extensions`, :func:`certificate`) are public so tests can build the bad
variants the policy must reject from the same code that builds good ones.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .policy import Role, utcnow

KeyMaker = Callable[[], CertificateIssuerPrivateKeyTypes]
KEY_TYPES: Dict[str, KeyMaker] = {
    "ec-p256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "ec-p384": lambda: ec.generate_private_key(ec.SECP384R1()),
    "rsa3072": lambda: rsa.generate_private_key(65537, 3072),
    "rsa4096": lambda: rsa.generate_private_key(65537, 4096),
}
DEFAULT_KEY_TYPE = "ec-p256"
# Backdated so a peer whose clock is a little behind still accepts a certificate made a moment ago.
CLOCK_SKEW = dt.timedelta(minutes=5)

Extension = Tuple[x509.ExtensionType, bool]  # the extension and whether it is critical
Digest = Union[hashes.SHA256, hashes.SHA384, hashes.SHA512]


def generate_key(key_type: str) -> CertificateIssuerPrivateKeyTypes:
    try:
        return KEY_TYPES[key_type]()
    except KeyError:
        raise ValueError(f"unknown key type {key_type!r}; choose one of {', '.join(KEY_TYPES)}") from None


def name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def subject_alt_name(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    entries: List[x509.GeneralName] = []
    for host in hosts:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            entries.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(entries)


def _key_usage(role: Role) -> x509.KeyUsage:
    ca = role is Role.CA
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not ca,  # TLS 1.2 RSA key transport; harmless for ECDSA
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


_EKU = {Role.SERVER: ExtendedKeyUsageOID.SERVER_AUTH, Role.CLIENT: ExtendedKeyUsageOID.CLIENT_AUTH}


def extensions(
    role: Role,
    public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
    issuer_public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
    hosts: Sequence[str] = (),
) -> List[Extension]:
    """The extensions the policy asks of a certificate of *role*."""
    found: List[Extension] = [
        (x509.BasicConstraints(ca=role is Role.CA, path_length=0 if role is Role.CA else None), True),
        (_key_usage(role), True),
        (x509.SubjectKeyIdentifier.from_public_key(public_key), False),
        (x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_public_key), False),
    ]
    if role is not Role.CA:
        found.append((x509.ExtendedKeyUsage([_EKU[role]]), False))
    if hosts:
        found.append((subject_alt_name(hosts), False))
    return found


def digest_for(key: CertificateIssuerPrivateKeyTypes) -> Digest:
    # Match the hash strength to the signing key (P-384 → SHA-384), as TLS stacks prefer.
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.key_size >= 384:
        return hashes.SHA384()
    return hashes.SHA256()


class Signer(NamedTuple):
    """Who signs a certificate, and how: the issuer's name and private key (a CA signs its own), and the
    digest (by default the one matching the key, :func:`digest_for`)."""

    name: x509.Name
    key: CertificateIssuerPrivateKeyTypes
    digest: Optional[Digest] = None


class Validity(NamedTuple):
    not_before: dt.datetime
    not_after: dt.datetime


def certificate(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
    signer: Signer,
    extensions: Sequence[Extension],
    validity: Validity,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer.name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity.not_before)
        .not_valid_after(validity.not_after)
    )
    for ext, critical in extensions:
        builder = builder.add_extension(ext, critical)
    return builder.sign(signer.key, signer.digest or digest_for(signer.key))


@dataclass(frozen=True)
class Issued:
    cert: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes

    @property
    def signer(self) -> Signer:
        return Signer(self.cert.subject, self.key)


@dataclass(frozen=True)
class Terms:
    """What a new certificate is made with: its key's type, and how many days it is valid from *now*
    (the moment it is made, unless given)."""

    key_type: str = DEFAULT_KEY_TYPE
    days: int = 365
    now: Optional[dt.datetime] = None

    def validity(self) -> Validity:
        now = self.now or utcnow()
        return Validity(now - CLOCK_SKEW, now + dt.timedelta(days=self.days))


def _public(key: CertificateIssuerPrivateKeyTypes) -> ec.EllipticCurvePublicKey | rsa.RSAPublicKey:
    public = key.public_key()
    assert isinstance(public, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey))
    return public


def new_ca(common_name: str, terms: Terms = Terms()) -> Issued:
    key = generate_key(terms.key_type)
    subject = name(common_name)
    exts = extensions(Role.CA, _public(key), _public(key))
    return Issued(certificate(subject, _public(key), Signer(subject, key), exts, terms.validity()), key)


def new_leaf(
    ca: Issued, role: Role, common_name: str, terms: Terms = Terms(), hosts: Sequence[str] = ()
) -> Issued:
    key = generate_key(terms.key_type)
    exts = extensions(role, _public(key), _public(ca.key), hosts)
    return Issued(certificate(name(common_name), _public(key), ca.signer, exts, terms.validity()), key)
