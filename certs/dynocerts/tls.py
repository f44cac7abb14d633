"""gRPC credentials from checked material: mutual TLS on both ends.

gRPC's SSL credentials negotiate TLS 1.2 or 1.3 (the core's default floor is TLS 1.2; the tests
confirm a TLS 1.1 handshake is refused) and always verify the peer against ``ca.crt``; the client
also checks the server's SAN against the name it dials.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from .keys import PasswordSource, pkcs8_pem
from .material import Material, load
from .policy import Role


def server_credentials(material: Material) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials(
        [(pkcs8_pem(material.key), material.cert_pem)],
        root_certificates=material.ca_pem,
        require_client_auth=True,
    )


def channel_credentials(material: Material) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=material.ca_pem,
        private_key=pkcs8_pem(material.key),
        certificate_chain=material.cert_pem,
    )


def load_server(certs_dir: Path, passwords: PasswordSource) -> Material:
    return load(certs_dir, Role.SERVER, passwords)


def load_client(certs_dir: Path, passwords: PasswordSource) -> Material:
    return load(certs_dir, Role.CLIENT, passwords)
