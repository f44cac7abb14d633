"""`dyno certs` as a user runs it: init makes what daemon, client and check accept; check explains every
problem; revoke takes effect on a running daemon."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

import pytest

import certs_factory as cf
from conftest import Authority
from dynocerts.policy import Role, when
from harness import Completed, Daemon, Dyno


def dyno(*args: str, cwd: Path) -> Completed:
    """`dyno` run in *cwd*: the material's folders are named as a user in that folder names them."""
    return Dyno(cwd=cwd, timeout=120)(*args)


@pytest.fixture(scope="module")
def pki_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("certs")
    result = dyno(
        "certs", "init", "pki", "--server-hosts", "localhost,127.0.0.1", "--client-name", "alice", cwd=cwd
    )
    assert result.returncode == 0, result.stderr
    return cwd


def test_init_prints_what_goes_where(tmp_path: Path) -> None:
    result = dyno(
        "certs", "init", "pki", "--server-hosts", "node01,10.0.0.5", "--client-name", "alice", "--days", "90",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Made a CA, a server and a client certificate in pki (ec-p256, valid 90 days):\n"
        "  pki/ca/      ca.crt, ca.key: keep here; it issues and revokes certificates\n"
        "  pki/server/  ca.crt, server.crt, server.key: for DNS:node01, IP:10.0.0.5\n"
        "  pki/client/  ca.crt, client.crt, client.key: for client 'alice'\n"
        "Copy the server directory to each daemon host (mode 700) and start:\n"
        "  dynolog --certs-dir pki/server --listen-address 0.0.0.0\n"
        "Copy the client directory to the user's machine and run:\n"
        "  dyno --hostname node01 --certs-dir pki/client status\n"
    )


def test_init_makes_owner_only_files(pki_root: Path) -> None:
    modes = {
        str(p.relative_to(pki_root)): stat.S_IMODE(p.stat().st_mode)
        for p in (pki_root / "pki").rglob("*")
        if "issued" not in p.parts
    }
    assert modes == {
        "pki/ca": 0o700, "pki/ca/ca.crt": 0o600, "pki/ca/ca.key": 0o600,
        "pki/server": 0o700, "pki/server/ca.crt": 0o600, "pki/server/server.crt": 0o600,
        "pki/server/server.key": 0o600,
        "pki/client": 0o700, "pki/client/ca.crt": 0o600, "pki/client/client.crt": 0o600,
        "pki/client/client.key": 0o600,
    }  # fmt: skip


@pytest.mark.parametrize("key_type", ["ec-p384", "rsa3072"])
def test_init_key_types_pass_check(tmp_path: Path, key_type: str) -> None:
    made = dyno(
        "certs",
        "init",
        "pki",
        "--server-hosts",
        "h",
        "--client-name",
        "c",
        "--key-type",
        key_type,
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    checked = dyno("certs", "check", "pki", cwd=tmp_path)
    assert (checked.returncode, checked.stderr) == (0, "")


def test_init_refuses_to_overwrite_a_ca(pki_root: Path) -> None:
    again = dyno("certs", "init", "pki", "--server-hosts", "h", "--client-name", "c", cwd=pki_root)
    assert (again.returncode, again.stderr) == (
        1,
        "dyno: pki/ca/ca.key exists: pki already holds a CA; add certificates with `dyno certs issue pki` or "
        "choose another directory\n",
    )


def test_init_unknown_key_type(tmp_path: Path) -> None:
    result = dyno(
        "certs", "init", "pki", "--server-hosts", "h", "--client-name", "c", "--key-type", "dsa", cwd=tmp_path
    )
    assert (result.returncode, result.stderr) == (
        2,
        "dyno: --key-type dsa: choose one of ec-p256, ec-p384, rsa3072, rsa4096\n",
    )


def test_check_accepts_init_output(pki_root: Path) -> None:
    result = dyno("certs", "check", "pki", cwd=pki_root)
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert [line.split(",")[0] for line in lines] == ["pki/ca: OK", "pki/client: OK", "pki/server: OK"]
    assert "for DNS:localhost, IP:127.0.0.1" in lines[2]


def test_daemon_and_client_accept_init_output(pki_root: Path, start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon("--certs-dir", str(pki_root / "pki" / "server"))
    reply = d.dyno_json("--certs-dir", str(pki_root / "pki" / "client"), "status")
    assert reply["tls"] is True


def test_check_explains_every_problem(tmp_path: Path, authority: Authority) -> None:
    start = cf.now() - 10 * cf.DAY
    expired = cf.leaf(authority.ca, Role.SERVER, "s", hosts=(), not_before=start, not_after=start + cf.DAY)
    d = cf.certs_dir(tmp_path / "server", Role.SERVER, authority.ca, expired, key_mode=0o640)
    result = dyno("certs", "check", "server", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "server: 3 problems (server)",
        f"  server/server.crt: validity: expired on {when(start + cf.DAY)}; needs a renewed certificate",
        "  server/server.crt: subjectAltName: missing; needs the DNS names and IP addresses clients give as "
        "--hostname (dyno certs init --server-hosts)",
        "  server/server.key: permissions: 0640 lets group/others read the private key; run: chmod 600 "
        "server/server.key",
    ]
    assert d.path.exists()


def test_check_json(tmp_path: Path, authority: Authority) -> None:
    cf.certs_dir(tmp_path / "client", Role.CLIENT, authority.ca, authority.alice, key_mode=0o644)
    import json

    result = dyno("--json", "certs", "check", "client", cwd=tmp_path)
    report = json.loads(result.stdout)
    assert result.returncode == 1
    assert [(r["directory"], r["role"], [e["field"] for e in r["errors"]]) for r in report] == [
        ("client", "client", ["permissions"])
    ]


def test_check_with_an_encrypted_key_and_no_password(tmp_path: Path, authority: Authority) -> None:
    cf.certs_dir(tmp_path / "client", Role.CLIENT, authority.ca, authority.alice, password=b"pw")
    no_password = {k: None for k in os.environ if k.endswith("_KEY_PASSWORD")}
    result = Dyno(cwd=tmp_path)("certs", "check", "client", env=no_password)
    assert result.returncode == 0
    assert result.stdout.splitlines()[1] == (
        "  warning: client/client.key: private key: encrypted, and no password was given; not checked "
        "against "
        "client.crt; needs --key-password-file FILE or $DYNO_KEY_PASSWORD or $DYNOLOG_KEY_PASSWORD (or a "
        "terminal to be asked on)"
    )


def test_check_nothing_there(tmp_path: Path) -> None:
    result = dyno("certs", "check", ".", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        1,
        "dyno: .: no ca.crt, server.crt or client.crt here or in its subdirectories\n",
    )


def test_revoke_on_a_running_daemon(tmp_path: Path, start_daemon: Callable[..., Daemon]) -> None:
    made = dyno("certs", "init", "pki", "--server-hosts", "localhost", "--client-name", "alice", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    bob = dyno("certs", "issue", "pki", "--client-name", "bob", cwd=tmp_path)
    assert bob.returncode == 0, bob.stderr
    assert bob.stdout.startswith("Made client certificate 'bob' in pki/client-bob (valid until ")
    d = start_daemon("--certs-dir", str(tmp_path / "pki" / "server"))
    alice, bobs = str(tmp_path / "pki" / "client"), str(tmp_path / "pki" / "client-bob")
    d.dyno("--certs-dir", alice, "status", expect=0)

    revoked = dyno("certs", "revoke", "pki", "--client-name", "alice", cwd=tmp_path)
    assert revoked.returncode == 0, revoked.stderr
    lines = revoked.stdout.splitlines()
    assert lines[0].startswith("Revoked 'alice' (serial ")
    assert lines[1].startswith("Wrote pki/ca/ca.crl (valid until ")
    assert lines[2:] == [
        "  copied to pki/server/ca.crl",
        "Copy it next to ca.crt in every daemon's --certs-dir; dynolog re-reads it on change, no restart.",
    ]
    refused = d.dyno("--certs-dir", alice, "status")
    assert refused.returncode == 3 and "refused this client: client certificate 'alice'" in refused.stderr
    d.dyno("--certs-dir", bobs, "status", expect=0)

    again = dyno("certs", "revoke", "pki", "--client-name", "alice", cwd=tmp_path)
    assert again.stdout.splitlines()[0] == "Nothing new to revoke: already listed"
    unknown = dyno("certs", "revoke", "pki", "--client-name", "mallory", cwd=tmp_path)
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "dyno: pki/ca/issued: no issued client certificate for mallory\n",
    )
    renewed = dyno("certs", "crl", "pki", "--crl-days", "60", cwd=tmp_path)
    assert renewed.returncode == 0, renewed.stderr
    assert d.dyno("--certs-dir", alice, "status").returncode == 3  # the renewed CRL keeps alice revoked
    checked = dyno("certs", "check", "pki/server", cwd=tmp_path)
    assert (checked.returncode, checked.stderr) == (0, "")
