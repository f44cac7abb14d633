"""The one certificate policy, shared by dynolog, dyno and ``dyno certs check``.

Every check returns violations instead of raising, so a user sees every problem of a directory at once.
Each violation renders as one line naming the file, the field and what is needed.
"""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Type, TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes, PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID

MIN_RSA_BITS = 3072
CURVES = {"secp256r1": "P-256", "secp384r1": "P-384"}
SIGNATURE_HASHES = ("sha256", "sha384", "sha512")
RENEW_WITHIN = dt.timedelta(days=30)
KEY_NEEDED = f"needs RSA >= {MIN_RSA_BITS} bits or ECDSA P-256/P-384"

_EKU_NAMES = {
    ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth",
    ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth",
    ExtendedKeyUsageOID.CODE_SIGNING: "codeSigning",
    ExtendedKeyUsageOID.EMAIL_PROTECTION: "emailProtection",
    ExtendedKeyUsageOID.TIME_STAMPING: "timeStamping",
    ExtendedKeyUsageOID.OCSP_SIGNING: "OCSPSigning",
}


class Role(enum.Enum):
    CA = "ca"
    SERVER = "server"
    CLIENT = "client"


_ROLE_EKU = {Role.SERVER: ExtendedKeyUsageOID.SERVER_AUTH, Role.CLIENT: ExtendedKeyUsageOID.CLIENT_AUTH}


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Violation:
    file: str
    field: str
    problem: str
    needed: str  # a phrase starting "needs ..." or "run: ..."
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        prefix = "warning: " if self.severity is Severity.WARNING else ""
        return f"{prefix}{self.file}: {self.field}: {self.problem}; {self.needed}"

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


def errors(violations: Iterable[Violation]) -> List[Violation]:
    return [v for v in violations if v.is_error]


def warnings(violations: Iterable[Violation]) -> List[Violation]:
    return [v for v in violations if not v.is_error]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def when(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


E = TypeVar("E", bound=x509.ExtensionType)


def extension(cert: x509.Certificate, kind: Type[E]) -> Optional[E]:
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


def describe_key(key: CertificatePublicKeyTypes) -> str:
    if isinstance(key, rsa.RSAPublicKey):
        return f"RSA {key.key_size} bits"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"ECDSA {CURVES.get(key.curve.name, key.curve.name)}"
    return type(key).__name__.removeprefix("_").removesuffix("PublicKey") or "unknown"


def common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def san_names(cert: x509.Certificate) -> List[str]:
    """``DNS:name`` and ``IP:address`` entries, as openssl prints them."""
    san = extension(cert, x509.SubjectAlternativeName)
    if san is None:
        return []
    dns = [f"DNS:{name}" for name in san.get_values_for_type(x509.DNSName)]
    return dns + [f"IP:{ip}" for ip in san.get_values_for_type(x509.IPAddress)]


def covers(cert: x509.Certificate, host: str) -> bool:
    """Whether a client connecting to *host* accepts this server certificate (SAN DNS or IP)."""
    san = extension(cert, x509.SubjectAlternativeName)
    if san is None:
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")) in san.get_values_for_type(x509.IPAddress)
    except ValueError:
        pass
    host = host.lower().rstrip(".")
    for name in san.get_values_for_type(x509.DNSName):
        name = name.lower().rstrip(".")
        if name == host or (name.startswith("*.") and host.partition(".")[2] == name[2:] and "." in name[2:]):
            return True
    return False


Check = Callable[[x509.Certificate, str, Role, dt.datetime], Iterable[Violation]]


def _version(cert: x509.Certificate, file: str, role: Role, now: dt.datetime) -> Iterable[Violation]:
    if cert.version is not x509.Version.v3:
        yield Violation(file, "version", f"X.509 {cert.version.name}", "needs X.509 v3")


def _public_key(cert: x509.Certificate, file: str, role: Role, now: dt.datetime) -> Iterable[Violation]:
    key = cert.public_key()
    weak_rsa = isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS
    other_curve = isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name not in CURVES
    other_kind = not isinstance(key, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey))
    if weak_rsa or other_curve or other_kind:
        yield Violation(file, "public key", describe_key(key), KEY_NEEDED)


def _signature(cert: x509.Certificate, file: str, role: Role, now: dt.datetime) -> Iterable[Violation]:
    oid = cert.signature_algorithm_oid
    try:
        digest = cert.signature_hash_algorithm
    except UnsupportedAlgorithm:
        digest = None
    signed_by_rsa_or_ecdsa = oid._name.startswith(("sha", "ecdsa", "rsassaPss"))
    if digest is None or digest.name not in SIGNATURE_HASHES or not signed_by_rsa_or_ecdsa:
        yield Violation(
            file, "signature algorithm", oid._name, "needs RSA or ECDSA with SHA-256, SHA-384 or SHA-512"
        )


def _validity(cert: x509.Certificate, file: str, role: Role, now: dt.datetime) -> Iterable[Violation]:
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    if now < start:
        yield Violation(
            file,
            "validity",
            f"not valid before {when(start)}",
            "needs a certificate valid now (check clocks)",
        )
    elif now > end:
        yield Violation(file, "validity", f"expired on {when(end)}", "needs a renewed certificate")
    elif end - now < RENEW_WITHIN:
        yield Violation(
            file,
            "validity",
            f"expires in {(end - now).days} days, on {when(end)}",
            "needs renewing before then",
            Severity.WARNING,
        )


def _basic_constraints(
    cert: x509.Certificate, file: str, role: Role, now: dt.datetime
) -> Iterable[Violation]:
    constraints = extension(cert, x509.BasicConstraints)
    is_ca = constraints is not None and constraints.ca
    if role is Role.CA and not is_ca:
        found = "missing" if constraints is None else "CA:FALSE"
        yield Violation(file, "basicConstraints", found, "needs CA:TRUE for the certificate authority")
    if role is not Role.CA and is_ca:
        yield Violation(
            file,
            "basicConstraints",
            "CA:TRUE",
            f"needs CA:FALSE: a {role.value} certificate must not be a CA",
        )


def _key_usage(cert: x509.Certificate, file: str, role: Role, now: dt.datetime) -> Iterable[Violation]:
    usage = extension(cert, x509.KeyUsage)
    wanted = ("key_cert_sign", "crl_sign") if role is Role.CA else ("digital_signature",)
    names = {"key_cert_sign": "keyCertSign", "crl_sign": "cRLSign", "digital_signature": "digitalSignature"}
    needed = "needs keyUsage with " + " and ".join(names[w] for w in wanted)
    if usage is None:
        yield Violation(file, "keyUsage", "missing", needed)
        return
    lacking = [names[w] for w in wanted if not getattr(usage, w)]
    if lacking:
        yield Violation(file, "keyUsage", "lacks " + ", ".join(lacking), needed)


def _extended_key_usage(
    cert: x509.Certificate, file: str, role: Role, now: dt.datetime
) -> Iterable[Violation]:
    wanted = _ROLE_EKU[role]
    needed = f"needs extendedKeyUsage {_EKU_NAMES[wanted]} for a {role.value} certificate"
    usage = extension(cert, x509.ExtendedKeyUsage)
    if usage is None:
        yield Violation(file, "extendedKeyUsage", "missing", needed)
    elif wanted not in usage:
        have = ", ".join(_EKU_NAMES.get(oid, oid.dotted_string) for oid in usage) or "nothing"
        yield Violation(file, "extendedKeyUsage", f"has {have}", needed)


def _subject_alt_name(cert: x509.Certificate, file: str, role: Role, now: dt.datetime) -> Iterable[Violation]:
    if not san_names(cert):
        yield Violation(
            file,
            "subjectAltName",
            "missing",
            "needs the DNS names and IP addresses clients give as --hostname "
            "(dyno certs init --server-hosts)",
        )


_COMMON: Sequence[Check] = (_version, _public_key, _signature, _validity, _basic_constraints, _key_usage)
_CHECKS = {
    Role.CA: _COMMON,
    Role.CLIENT: (*_COMMON, _extended_key_usage),
    Role.SERVER: (*_COMMON, _extended_key_usage, _subject_alt_name),
}


def check_certificate(
    cert: x509.Certificate, file: str, role: Role, now: Optional[dt.datetime] = None
) -> List[Violation]:
    now = now or utcnow()
    return [v for check in _CHECKS[role] for v in check(cert, file, role, now)]


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except InvalidSignature:
        return False
    except (ValueError, TypeError, UnsupportedAlgorithm):
        # cryptography does not verify weak algorithms (SHA-1); that is reported as its own violation,
        # so judge the issuer by name here rather than add a second, misleading one.
        return cert.issuer == ca.subject
    return True


def issued_by(cert: x509.Certificate, cas: Sequence[x509.Certificate]) -> Optional[x509.Certificate]:
    return next((ca for ca in cas if _signed_by(cert, ca)), None)


def check_issued_by(
    cert: x509.Certificate, file: str, cas: Sequence[x509.Certificate], ca_file: str
) -> List[Violation]:
    if issued_by(cert, cas) is not None:
        return []
    return [
        Violation(
            file,
            "issuer",
            f"signed by '{cert.issuer.rfc4514_string()}', not by the CA in {ca_file}",
            f"needs a certificate issued by the CA in {ca_file}",
        )
    ]


def _spki(key: CertificatePublicKeyTypes) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def check_key_matches(
    cert: x509.Certificate, cert_file: str, key: PrivateKeyTypes, key_file: str
) -> List[Violation]:
    if _spki(cert.public_key()) == _spki(key.public_key()):  # type: ignore[arg-type]
        return []
    return [
        Violation(
            key_file,
            "private key",
            f"does not match {cert_file}",
            "needs the key the certificate was made for",
        )
    ]


def check_covers(cert: x509.Certificate, file: str, hosts: Sequence[str]) -> List[Violation]:
    """A warning when the server certificate names none of *hosts*: clients would fail to verify it."""
    if not hosts or any(covers(cert, host) for host in hosts):
        return []
    names = ", ".join(san_names(cert)) or "nothing"
    return [
        Violation(
            file,
            "subjectAltName",
            f"names {names}, none of this host's names ({', '.join(hosts)})",
            "needs those names if clients use them as --hostname",
            Severity.WARNING,
        )
    ]
