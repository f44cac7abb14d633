"""gRPC credentials from checked material: mutual TLS on both ends.

gRPC's SSL credentials negotiate TLS 1.2 or 1.3 (the core's default floor is TLS 1.2; the tests
confirm a TLS 1.1 handshake is refused) and always verify the peer against ``ca.crt``; the client
also checks the server's SAN against the name it dials.

The daemon's credentials are dynamic: gRPC asks a fetcher for a new certificate configuration before
every handshake, so a renewed certificate, key or CA is served without a restart.
"""

from __future__ import annotations

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
