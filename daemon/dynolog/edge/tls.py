"""The daemon's TLS set (``ca.crt``, ``server.crt``, ``server.key``) followed on disk while serving.

gRPC calls :meth:`ServerTls.fetch` before every TLS handshake. It compares the three files' stamps
(inode, size, mtime) with those it last saw and, only when they changed, loads and checks the set with
the certificate policy the daemon applies at start. A usable set is handed to gRPC and served from the
next handshake on; connections already open keep the TLS session they have. An unusable set (half
written, a key that does not match, a certificate from another CA, ...) is logged once, with every
problem, and the previous set stays in service: a daemon that started has a valid set until one
replaces it. ``ca.crl`` is not part of the set: :class:`dynocerts.crl.RevocationWatch` follows it per
call and is told when ``ca.crt`` changes, so the CRL is then checked against the new CA.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
import threading
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import grpc

from dynocerts.crl import RevocationWatch, check_not_revoked
from dynocerts.files import file_stamps
from dynocerts.keys import PasswordSource
from dynocerts.material import CA_CERT, CertsError, Material, own_files
from dynocerts.policy import Role, Violation, check_covers, errors
from dynocerts.tls import load_server, server_configuration, server_credentials, server_ssl_context

log = logging.getLogger("dynolog.tls")


class ServerTls:
    """The set being served, its revocation list, and the fetcher that swaps in a renewed set."""

    def __init__(self, material: Material, passwords: PasswordSource, hosts: Sequence[str]) -> None:
        self._material = material
        # Nobody can answer a prompt while the daemon serves: a reloaded key needs a file or $VAR.
        self._passwords = dataclasses.replace(passwords, prompt=False)
        self._hosts = tuple(hosts)
        cert, key = own_files(Role.SERVER)
        self._cert_file = str(material.directory / cert)
        self._files = (str(material.directory / CA_CERT), self._cert_file, str(material.directory / key))
        self._stamps = file_stamps(self._files)
        self._lock = threading.Lock()  # gRPC fetches from its own threads, one per handshake
        self._served_to_grpc = material
        self._legacy: Tuple[Material, Optional[ssl.SSLContext]] = (material, None)
        self.revocations = RevocationWatch(material.crl_path, material.cas, material.ca_file)

    @classmethod
    def from_dir(cls, certs_dir: Path, passwords: PasswordSource, hosts: Sequence[str]) -> ServerTls:
        """The set in *certs_dir* checked as at start (its CRL included), or :class:`CertsError`."""
        material = load_server(certs_dir, passwords)
        _announce(material, hosts, "mutual TLS")
        return cls(material, passwords, hosts)

    def credentials(self) -> grpc.ServerCredentials:
        return server_credentials(self._material, self.fetch)

    def fetch(self) -> Optional[grpc.ServerCertificateConfiguration]:
        """A new configuration when the files changed into a usable set; None keeps the current one."""
        self._follow()
        with self._lock:
            if self._material is self._served_to_grpc:
                return None
            self._served_to_grpc = material = self._material
        return server_configuration(material)

    def legacy_context(self) -> ssl.SSLContext:
        """The set now served, for a TLS handshake of msMonitor's JSON RPC (made once per set)."""
        self._follow()
        with self._lock:
            material, context = self._legacy
            if material is not self._material or context is None:
                context = server_ssl_context(self._material)
                self._legacy = (self._material, context)
        return context

    def _follow(self) -> None:
        """Take up a changed set if it is usable; each server learns of it at its next handshake."""
        try:
            self._reload_if_changed()
        except Exception:  # an exception here would only reach gRPC's C core as "keep the old set"
            log.exception("reloading the TLS set from %s failed; still serving the previous one", self._dir)

    @property
    def _dir(self) -> Path:
        return self._material.directory

    def _reload_if_changed(self) -> None:
        stamps = file_stamps(self._files)  # before every handshake: three stat calls, nothing read
        with self._lock:
            if stamps == self._stamps:
                return
            # Taken before reading: a file changing while it is read is seen again at the next handshake.
            self._stamps = stamps
            material = self._check()
            if material is not None:
                self._material = material
                self.revocations.trust(material.cas)

    def _check(self) -> Optional[Material]:
        try:
            material = load_server(self._dir, self._passwords, with_crl=False)
        except CertsError as exc:
            self._keep_previous(exc.violations)
            return None
        revoked = self._own_revocation(material)
        if revoked:
            self._keep_previous(revoked)
            return None
        _announce(material, self._hosts, "reloaded the TLS set")
        return material

    def _own_revocation(self, material: Material) -> List[Violation]:
        crl = self.revocations.state().crl
        if crl is None:
            return []
        return check_not_revoked(material.cert, self._cert_file, crl, str(material.crl_path))

    def _keep_previous(self, violations: Sequence[Violation]) -> None:
        log.error(
            "the TLS files in %s changed but are not usable; still serving the previous set "
            "(server.crt serial %X) until they are fixed: %s",
            self._dir,
            self._material.cert.serial_number,
            "; ".join(str(v) for v in errors(violations) or violations),
        )


def _announce(material: Material, hosts: Sequence[str], what: str) -> None:
    """The set's warnings, then what is served and to whom."""
    cert_file = str(material.directory / own_files(Role.SERVER)[0])
    for warning in [*material.warnings, *check_covers(material.cert, cert_file, hosts)]:
        log.warning("%s", warning)
    log.info(
        "%s: serving as %s (serial %X), clients verified against %s, revocations from %s when present",
        what,
        material.cert.subject.rfc4514_string(),
        material.cert.serial_number,
        material.ca_file,
        material.crl_path,
    )
