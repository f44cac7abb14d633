"""The certificate policy, key loading and CRL checks, one rule per test, with the exact line a user sees."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from cryptography import x509

import certs_factory as cf
from conftest import Authority
from dynocerts import keys, material
from dynocerts.crl import RevocationWatch, check_crl
from dynocerts.keys import PasswordSource
from dynocerts.policy import Role, check_certificate, covers, when

NO_PASSWORD = PasswordSource(prompt=False)


def problems(cert: x509.Certificate, role: Role, file: str = "x.crt") -> list[str]:
    return [str(v) for v in check_certificate(cert, file, role)]


def test_good_certificates_pass(authority: Authority) -> None:
    assert problems(authority.ca.cert, Role.CA) == []
    assert problems(authority.server.cert, Role.SERVER) == []
    assert problems(authority.alice.cert, Role.CLIENT) == []


def test_rsa_2048_is_refused(authority: Authority) -> None:
    weak = cf.leaf(authority.ca, Role.CLIENT, "alice", private_key=cf.key("rsa2048"))
    assert problems(weak.cert, Role.CLIENT) == [
        "x.crt: public key: RSA 2048 bits; needs RSA >= 3072 bits or ECDSA P-256/P-384"
    ]


def test_p521_is_refused(authority: Authority) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    odd = cf.leaf(authority.ca, Role.CLIENT, "alice", private_key=ec.generate_private_key(ec.SECP521R1()))
    assert problems(odd.cert, Role.CLIENT) == [
        "x.crt: public key: ECDSA secp521r1; needs RSA >= 3072 bits or ECDSA P-256/P-384"
    ]


def test_sha1_signature_is_refused(rsa_authority: cf.Issued) -> None:
    good = cf.leaf(rsa_authority, Role.SERVER, "localhost")
    sha1 = cf.with_sha1_signature(good.cert, rsa_authority.key)  # type: ignore[arg-type]
    assert problems(good.cert, Role.SERVER) == []
    assert problems(sha1, Role.SERVER) == [
        "x.crt: signature algorithm: sha1WithRSAEncryption; needs RSA or ECDSA with SHA-256, SHA-384 or "
        "SHA-512"
    ]


def test_expired_and_not_yet_valid(authority: Authority) -> None:
    start = cf.now() - 10 * cf.DAY
    expired = cf.leaf(authority.ca, Role.CLIENT, "a", not_before=start, not_after=start + cf.DAY)
    assert problems(expired.cert, Role.CLIENT) == [
        f"x.crt: validity: expired on {when(start + cf.DAY)}; needs a renewed certificate"
    ]
    future = cf.now() + 2 * cf.DAY
    early = cf.leaf(authority.ca, Role.CLIENT, "a", not_before=future)
    assert problems(early.cert, Role.CLIENT) == [
        f"x.crt: validity: not valid before {when(future)}; needs a certificate valid now (check clocks)"
    ]


def test_expiring_soon_is_a_warning(authority: Authority) -> None:
    soon = cf.leaf(authority.ca, Role.CLIENT, "a", not_after=cf.now() + 10 * cf.DAY + dt.timedelta(hours=1))
    found = check_certificate(soon.cert, "x.crt", Role.CLIENT)
    assert [v.is_error for v in found] == [False]
    assert str(found[0]).startswith("warning: x.crt: validity: expires in 10 days, on ")


def test_ca_needs_ca_true_and_key_usage() -> None:
    no_usage = cf.authority(drop=[x509.KeyUsage])
    assert problems(no_usage.cert, Role.CA) == [
        "x.crt: keyUsage: missing; needs keyUsage with keyCertSign and cRLSign"
    ]
    not_ca = cf.authority(drop=[x509.BasicConstraints])
    assert problems(not_ca.cert, Role.CA) == [
        "x.crt: basicConstraints: missing; needs CA:TRUE for the certificate authority"
    ]


def test_leaf_must_not_be_a_ca(authority: Authority) -> None:
    ca_leaf = cf.leaf(
        authority.ca, Role.SERVER, "h", replace=[(x509.BasicConstraints(ca=True, path_length=None), True)]
    )
    assert problems(ca_leaf.cert, Role.SERVER) == [
        "x.crt: basicConstraints: CA:TRUE; needs CA:FALSE: a server certificate must not be a CA"
    ]


def test_leaf_needs_key_usage_and_the_right_eku(authority: Authority) -> None:
    no_usage = cf.leaf(authority.ca, Role.CLIENT, "a", drop=[x509.KeyUsage])
    assert problems(no_usage.cert, Role.CLIENT) == [
        "x.crt: keyUsage: missing; needs keyUsage with digitalSignature"
    ]
    no_eku = cf.leaf(authority.ca, Role.CLIENT, "a", drop=[x509.ExtendedKeyUsage])
    assert problems(no_eku.cert, Role.CLIENT) == [
        "x.crt: extendedKeyUsage: missing; needs extendedKeyUsage clientAuth for a client certificate"
    ]
    # A client certificate presented as a server's.
    assert problems(authority.alice.cert, Role.SERVER)[0] == (
        "x.crt: extendedKeyUsage: has clientAuth; needs extendedKeyUsage serverAuth for a server certificate"
    )


def test_server_needs_subject_alt_names(authority: Authority) -> None:
    bare = cf.leaf(authority.ca, Role.SERVER, "localhost", hosts=())
    assert problems(bare.cert, Role.SERVER) == [
        "x.crt: subjectAltName: missing; needs the DNS names and IP addresses clients give as --hostname "
        "(dyno certs init --server-hosts)"
    ]


def test_san_matching(authority: Authority) -> None:
    cert = cf.leaf(authority.ca, Role.SERVER, "n", hosts=["node01", "*.cluster.lan", "10.0.0.5", "::1"]).cert
    hosts = ("node01", "NODE01.", "a.cluster.lan", "a.b.cluster.lan", "10.0.0.5", "[::1]", "x")
    assert [covers(cert, h) for h in hosts] == [True, True, True, False, True, True, False]


def test_directory_from_another_ca(tmp_path: Path, authority: Authority, other_authority: Authority) -> None:
    d = cf.certs_dir(
        tmp_path / "c", Role.CLIENT, other_authority.ca, other_authority.alice, trust=authority.ca
    )
    _, found = material.inspect(d.path, Role.CLIENT, NO_PASSWORD)
    assert [str(v) for v in found] == [
        f"{d.cert}: issuer: signed by 'CN=Other CA', not by the CA in {d.ca}; needs a certificate issued by "
        "the "
        f"CA in {d.ca}"
    ]


def test_key_that_does_not_match(tmp_path: Path, authority: Authority) -> None:
    d = cf.certs_dir(tmp_path / "c", Role.CLIENT, authority.ca, authority.alice)
    cf.write(d.key, cf.key_pem(authority.bob.key))
    _, found = material.inspect(d.path, Role.CLIENT, NO_PASSWORD)
    assert [str(v) for v in found] == [
        f"{d.key}: private key: does not match {d.cert}; needs the key the certificate was made for"
    ]


def test_missing_files_are_each_reported(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    _, found = material.inspect(tmp_path / "empty", Role.SERVER, NO_PASSWORD)
    d = tmp_path / "empty"
    assert [str(v) for v in found] == [
        f"{d}/ca.crt: file: missing; needs the CA certificate (PEM)",
        f"{d}/server.crt: file: missing; needs the server certificate (PEM)",
        f"{d}/server.key: file: No such file or directory; needs the private key (PEM)",
    ]


@pytest.mark.parametrize("pkcs1", [False, True], ids=["pkcs8", "pkcs1"])
def test_plain_keys_in_both_formats_load(tmp_path: Path, rsa_authority: cf.Issued, pkcs1: bool) -> None:
    path = cf.write(tmp_path / "k.key", cf.key_pem(rsa_authority.key, pkcs1=pkcs1))
    assert (b"BEGIN RSA PRIVATE KEY" in path.read_bytes()) is pkcs1
    loaded = keys.load_private_key(path, NO_PASSWORD)
    assert loaded.public_key().public_numbers() == rsa_authority.key.public_key().public_numbers()  # type: ignore[union-attr]


@pytest.mark.parametrize("pkcs1", [False, True], ids=["pkcs8", "pkcs1"])
def test_encrypted_keys_in_both_formats(tmp_path: Path, authority: Authority, pkcs1: bool) -> None:
    path = cf.write(tmp_path / "k.key", cf.key_pem(authority.alice.key, b"s3cret", pkcs1=pkcs1))
    pw = cf.write(tmp_path / "pw", b"s3cret\n")
    keys.load_private_key(path, PasswordSource(pw))
    with pytest.raises(keys.KeyLoadError) as missing:
        keys.load_private_key(path, PasswordSource(env_vars=("X_UNSET_PW",), prompt=False))
    assert str(missing.value) == (
        f"{path}: private key: encrypted, and no password was given; needs --key-password-file FILE or "
        "$X_UNSET_PW (or a terminal to be asked on)"
    )


def test_password_file_must_be_owner_only(tmp_path: Path, authority: Authority) -> None:
    path = cf.write(tmp_path / "k.key", cf.key_pem(authority.alice.key, b"pw"))
    pw = cf.write(tmp_path / "pw", b"pw", mode=0o640)
    with pytest.raises(keys.KeyLoadError) as err:
        keys.load_private_key(path, PasswordSource(pw))
    assert (
        str(err.value) == f"{pw}: permissions: 0640 lets group/others read the password; run: chmod 600 {pw}"
    )


def test_readable_key_is_refused_with_the_fix(tmp_path: Path, authority: Authority) -> None:
    path = cf.write(tmp_path / "k.key", cf.key_pem(authority.alice.key), mode=0o644)
    with pytest.raises(keys.KeyLoadError) as err:
        keys.load_private_key(path, NO_PASSWORD)
    assert (
        str(err.value)
        == f"{path}: permissions: 0644 lets group/others read the private key; run: chmod 600 {path}"
    )


def test_crl_from_another_ca_and_expired(authority: Authority, other_authority: Authority) -> None:
    foreign = x509.load_pem_x509_crl(cf.revocation_list(other_authority.ca))
    assert [str(v) for v in check_crl(foreign, "ca.crl", [authority.ca.cert], "ca.crt")] == [
        "ca.crl: signature: not signed by the CA in ca.crt (issuer 'CN=Other CA'); needs a CRL issued by "
        "the CA in "
        "ca.crt"
    ]
    issued = cf.now() - 3 * cf.DAY
    stale = x509.load_pem_x509_crl(cf.revocation_list(authority.ca, lifetime=cf.DAY, last_update=issued))
    assert [str(v) for v in check_crl(stale, "ca.crl", [authority.ca.cert], "ca.crt")] == [
        f"ca.crl: nextUpdate: expired on {when(issued + cf.DAY)}; needs a fresh CRL from the CA (dyno certs "
        "crl)"
    ]


def test_revocation_watch_follows_the_file(tmp_path: Path, authority: Authority) -> None:
    path = tmp_path / "ca.crl"
    watch = RevocationWatch(path, [authority.ca.cert], "ca.crt")
    alice, bob = authority.alice.cert.serial_number, authority.bob.cert.serial_number
    assert watch.revocation(alice) is None  # no file: nothing revoked
    cf.write(path, cf.revocation_list(authority.ca, [authority.alice.cert]))
    assert "revoked on" in (watch.revocation(alice) or "")
    assert watch.revocation(bob) is None
    cf.write(path, b"garbage")
    os.utime(path, ns=(1, 1))  # a change the watch must notice even within one mtime tick
    assert watch.revocation(bob) == (
        f"the daemon cannot check revocation ({path}: file: not a PEM certificate revocation list; needs a "
        "PEM "
        "CRL); every client is refused until it is fixed"
    )
    cf.write(path, cf.revocation_list(authority.ca))
    assert watch.revocation(alice) is None
