"""dynocerts: make, load and check the TLS material of dynolog and dyno against one certificate policy.

- :mod:`policy`: what a certificate must be, as a list of typed violations;
- :mod:`keys`: private keys and where their passwords come from;
- :mod:`crl`: revocation lists: checking, making, and watching one on disk;
- :mod:`material`: a ``--certs-dir`` loaded and checked as a whole;
- :mod:`make` and :mod:`pki`: new keys and certificates, and the directory layout ``dyno certs`` keeps;
- :mod:`tls`: gRPC credentials from checked material.
"""
