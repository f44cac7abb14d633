"""The Prometheus exporter's web configuration (``--prometheus-web-config FILE``, alias
``--web.config.file``): the YAML file of Prometheus' exporter-toolkit, so one file format protects every
exporter of a node.

What dynolog reads of it::

    tls_server_config:            # serve HTTPS
      cert_file: server.crt       # relative paths are relative to the file's folder, as exporters do
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert (default), VerifyClientCertIfGiven
      client_ca_file: ca.crt      # needed by both verifying policies
      min_version: TLS12          # TLS10..TLS13 (default TLS12); max_version likewise (default TLS13)
    basic_auth_users:             # user: bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')
      prometheus: $2y$10$...

Keys are checked as strictly as exporter-toolkit checks them: an unknown key, or one given twice, is an
error that names it. exporter-toolkit's other keys (inline ``cert``/``key``/``client_ca``, ``cipher_suites``,
``client_allowed_sans``, ``http_server_config``, ``rate_limit``...) are refused by name too, never
silently ignored: a file that asks for a protection dynolog would not give must not start the daemon.
The file is read once, at start (exporter-toolkit rereads it per request): restart to apply a change.

PyYAML and bcrypt come with the extra ``msmonitor-dynolog[prometheus-auth]``; they are imported only
when the flag is given, so the base install stays without them.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

EXTRA = "pip install 'msmonitor-dynolog[prometheus-auth]'"

_TOP = {"tls_server_config", "basic_auth_users"}
_TLS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"}
# exporter-toolkit's keys that dynolog does not implement: refused with that reason, not as unknown.
_NOT_SUPPORTED = {
    "http_server_config",
    "rate_limit",
    "cert",
    "key",
    "client_ca",
    "client_allowed_sans",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
}
_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
# Go's policies that accept a certificate without verifying it have no equivalent in Python's ssl, and
# exporter-toolkit's documentation calls them insecure: refused, pointing at the one that protects.
_VERIFYING = {
    "": ssl.CERT_NONE,
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_UNVERIFIED = {"RequestClientCert", "RequireAnyClientCert", "RequireClientCert"}
# Modular crypt format of bcrypt: $2a$, $2b$, $2y$ (htpasswd writes 2y), the cost, 53 characters.
_BCRYPT = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")  # costs 4..31


class WebConfigError(ValueError):
    """What is wrong with the web configuration file, worded for the operator."""


@dataclass(frozen=True)
class WebConfig:
    """The checked file: a TLS context (None: plain HTTP) and the users' bcrypt hashes (empty: no
    basic auth)."""

    path: Path
    tls: Optional[ssl.SSLContext] = None
    users: Mapping[str, bytes] = field(default_factory=dict)

    @property
    def protects(self) -> bool:
        """Whether the file keeps anyone out: users, or TLS that requires a verified client certificate.
        TLS alone under NoClientCert or VerifyClientCertIfGiven encrypts, but admits whoever connects."""
        return bool(self.users) or (self.tls is not None and self.tls.verify_mode == ssl.CERT_REQUIRED)


def load(path: Path) -> WebConfig:
    """Read and check *path*; WebConfigError names the file and the problem, ImportError the extra."""
    try:
        import bcrypt  # noqa: F401  (used when serving; missing, it is said now, at start)
        import yaml
    except ImportError as exc:
        raise ImportError(f"--prometheus-web-config needs PyYAML and bcrypt ({exc}): {EXTRA}") from None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WebConfigError(f"--prometheus-web-config {path}: cannot read it: {_reason(exc)}") from None
    try:
        document = yaml.load(text, Loader=_strict_loader(yaml))  # a SafeLoader: plain data only
        return _checked(path, document)
    except yaml.YAMLError as exc:
        raise WebConfigError(f"--prometheus-web-config {path}: not YAML: {_yaml_problem(exc)}") from None
    except WebConfigError as exc:
        raise WebConfigError(f"--prometheus-web-config {path}: {exc}") from None


def _strict_loader(yaml: Any) -> Any:
    """PyYAML's SafeLoader, refusing a key given twice in one mapping (it would keep the last, silently;
    exporter-toolkit refuses): a user listed twice is a mistake to say, not to guess."""

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any) -> Any:
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable: construct_mapping says so
                continue
            if duplicate:
                raise WebConfigError(f"line {key_node.start_mark.line + 1}: {key!r} is given twice")
        return loader.construct_mapping(node)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Strict


def _checked(path: Path, document: Any) -> WebConfig:
    top = _mapping(document, "the file")  # an empty file is valid, as in exporter-toolkit: no protection
    _known_keys(top, _TOP, "")
    tls = top.get("tls_server_config")
    users = top.get("basic_auth_users")
    return WebConfig(
        path,
        _tls_context(_mapping(tls, "tls_server_config"), path.parent) if tls is not None else None,
        _users(_mapping(users, "basic_auth_users")) if users is not None else {},
    )


def _mapping(value: Any, where: str) -> Dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{where} must be a mapping of keys to values, got {type(value).__name__}")
    return value


def _known_keys(section: Mapping[Any, Any], known: set, where: str) -> None:
    for key in section:
        place = f" in {where}" if where else ""
        if key in _NOT_SUPPORTED:
            raise WebConfigError(
                f"{key!r}{place} is exporter-toolkit's but dynolog does not support it; remove it "
                f"(dynolog reads: {', '.join(sorted(known))})"
            )
        if key not in known:
            raise WebConfigError(f"unknown key {key!r}{place} (known: {', '.join(sorted(known))})")


def _string(section: Mapping[str, Any], key: str, where: str) -> str:
    value = section.get(key, "")
    if not isinstance(value, str):
        raise WebConfigError(f"{where}.{key} must be a string, got {value!r}")
    return value


def _file(section: Mapping[str, Any], key: str, base: Path) -> Optional[Path]:
    name = _string(section, key, "tls_server_config")
    if not name:
        return None
    path = base / name  # relative to the web config's folder; an absolute name replaces base
    if not path.is_file():
        raise WebConfigError(f"tls_server_config.{key} {path}: no such file")
    return path


def _tls_context(section: Mapping[str, Any], base: Path) -> ssl.SSLContext:
    _known_keys(section, _TLS, "tls_server_config")
    cert, key = _file(section, "cert_file", base), _file(section, "key_file", base)
    if cert is None or key is None:
        raise WebConfigError("tls_server_config needs both cert_file and key_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _version(section, "min_version", "TLS12")
    context.maximum_version = _version(section, "max_version", "TLS13")
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise WebConfigError(
            f"tls_server_config: cannot use cert_file {cert} with key_file {key}: {_reason(exc)}"
        ) from None
    _client_auth(context, section, base)
    return context


def _version(section: Mapping[str, Any], key: str, default: str) -> ssl.TLSVersion:
    name = _string(section, key, "tls_server_config") or default
    if name not in _VERSIONS:
        raise WebConfigError(f"tls_server_config.{key} {name!r}: expected one of {', '.join(_VERSIONS)}")
    return _VERSIONS[name]


def _client_auth(context: ssl.SSLContext, section: Mapping[str, Any], base: Path) -> None:
    policy = _string(section, "client_auth_type", "tls_server_config")
    ca = _file(section, "client_ca_file", base)
    if policy in _UNVERIFIED:
        raise WebConfigError(
            f"tls_server_config.client_auth_type {policy} accepts unverified client certificates, which "
            "dynolog does not do: use RequireAndVerifyClientCert with client_ca_file"
        )
    if policy not in _VERIFYING:
        names = ", ".join(p for p in _VERIFYING if p)
        raise WebConfigError(f"tls_server_config.client_auth_type {policy!r}: expected one of {names}")
    mode = _VERIFYING[policy]
    if mode == ssl.CERT_NONE:
        if ca is not None:  # as exporter-toolkit: a CA without a policy is a mistake, not a default
            raise WebConfigError(
                "tls_server_config.client_ca_file is given but client_auth_type does not verify client "
                "certificates: set client_auth_type: RequireAndVerifyClientCert"
            )
        return
    if ca is None:
        raise WebConfigError(f"tls_server_config.client_auth_type {policy} needs client_ca_file")
    try:
        context.load_verify_locations(cafile=str(ca))
    except (ssl.SSLError, OSError) as exc:
        raise WebConfigError(f"tls_server_config.client_ca_file {ca}: {_reason(exc)}") from None
    context.verify_mode = mode


def _users(section: Mapping[Any, Any]) -> Dict[str, bytes]:
    users: Dict[str, bytes] = {}
    for user, hashed in section.items():
        if not isinstance(user, str) or not user or ":" in user:
            # YAML reads `yes:` or `123:` as a boolean or a number: quote the name.
            raise WebConfigError(
                f"basic_auth_users: {user!r} is not a user name (a quoted string without ':')"
            )
        if not isinstance(hashed, str) or not _BCRYPT.fullmatch(hashed):
            raise WebConfigError(
                f"basic_auth_users.{user}: not a bcrypt hash (expected $2y$10$ then 53 characters, as "
                "`htpasswd -nBC 10 \"\" | tr -d ':\\n'` prints)"
            )
        users[user] = hashed.encode("ascii")
    return users


def _yaml_problem(exc: Exception) -> str:
    """PyYAML's message on one line (its own spans several, quoting the file): where, and what."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(exc).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
