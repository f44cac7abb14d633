"""gRPC credentials from checked material: mutual TLS on both ends.

gRPC's SSL credentials negotiate TLS 1.2 or 1.3 (the core's default floor is TLS 1.2; the tests
confirm a TLS 1.1 handshake is refused) and always verify the peer against ``ca.crt``; the client
also checks the server's SAN against the name it dials.

The daemon's credentials are dynamic: gRPC asks a fetcher for a new certificate configuration before
every handshake, so a renewed certificate, key or CA is served without a restart.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Callable, Optional

import grpc

from .keys import PasswordSource, pkcs8_pem
from .material import Material, load
from .policy import Role

Fetcher = Callable[[], Optional[grpc.ServerCertificateConfiguration]]  # None: keep the current one


def server_configuration(material: Material) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(pkcs8_pem(material.key), material.cert_pem)], root_certificates=material.ca_pem
    )


def server_ssl_context(material: Material) -> ssl.SSLContext:
    """The same mutual TLS for a server that is not gRPC (msMonitor's JSON RPC): TLS 1.2 or later, the
    client verified against ``ca.crt``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.verify_mode = ssl.CERT_REQUIRED
    return _mutual(context, material)


def client_ssl_context(material: Material) -> ssl.SSLContext:
    """msMonitor's client TLS, for ``dyno`` talking to its C++ daemon: TLS 1.2 or later, the server
    verified against ``ca.crt`` alone and by the name dialled (its SAN), our certificate presented;
    no ALPN."""
    return _mutual(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), material)


def _mutual(context: ssl.SSLContext, material: Material) -> ssl.SSLContext:
    """*context* trusting ``ca.crt`` and presenting *material*'s certificate. The key goes to OpenSSL
    through an in-memory file: the standard library loads keys from paths only, and this one must not
    touch a disk."""
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_verify_locations(cadata=material.ca_pem.decode())
    fd = os.memfd_create(f"{material.role.value}-key", os.MFD_CLOEXEC)
    try:
        os.write(fd, pkcs8_pem(material.key) + material.cert_pem)
        context.load_cert_chain(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    return context


def server_credentials(material: Material, fetch: Fetcher) -> grpc.ServerCredentials:
    """Mutual TLS serving *material* until *fetch* returns a new configuration."""
    return grpc.dynamic_ssl_server_credentials(
        server_configuration(material),
        fetch,  # type: ignore[arg-type]  # grpc-stubs omit the documented None ("no change")
        require_client_authentication=True,
    )


def channel_credentials(material: Material) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=material.ca_pem,
        private_key=pkcs8_pem(material.key),
        certificate_chain=material.cert_pem,
    )


def load_server(certs_dir: Path, passwords: PasswordSource, with_crl: bool = True) -> Material:
    return load(certs_dir, Role.SERVER, passwords, with_crl)


def load_client(certs_dir: Path, passwords: PasswordSource) -> Material:
    return load(certs_dir, Role.CLIENT, passwords)
