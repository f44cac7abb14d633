"""``dyno certs``: make, check and revoke the certificates of mutual TLS between dyno and dynolog.

dyno certs init ./pki --server-hosts node01,10.0.0.5 --client-name alice
dyno certs check ./pki
dyno certs revoke ./pki --client-name alice
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from dynocerts import material, pki
from dynocerts.keys import PasswordSource
from dynocerts.make import DEFAULT_KEY_TYPE, KEY_TYPES
from dynocerts.policy import Role, Violation, common_name, errors, san_names, when

from ..connection import KEY_PASSWORD_ENV, Target
from ..exits import EXIT_FAILED, EXIT_USAGE, CliError
from ..output import print_json

app = typer.Typer(
    help="Make, check and revoke the certificates for mutual TLS (--certs-dir).",
    no_args_is_help=True,
)

PASSWORD_FILE = typer.Option(
    None, "--key-password-file", help=f"file with the password of an encrypted key (or ${KEY_PASSWORD_ENV})"
)
KEY_TYPE = typer.Option(DEFAULT_KEY_TYPE, "--key-type", help=f"one of {', '.join(KEY_TYPES)}")
DAYS = typer.Option(365, "--days", min=1, help="validity of the server and client certificates")


def _passwords(password_file: Optional[Path], *extra_env: str) -> PasswordSource:
    return PasswordSource(password_file, (KEY_PASSWORD_ENV, *extra_env))


def _hosts(text: str) -> List[str]:
    return [h.strip() for h in text.split(",") if h.strip()]


def _key_type(key_type: str) -> str:
    if key_type not in KEY_TYPES:
        raise CliError(f"--key-type {key_type}: choose one of {', '.join(KEY_TYPES)}", EXIT_USAGE)
    return key_type


def _pki_action(action: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return action(*args, **kwargs)
    except pki.PkiError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None


def init(
    directory: Path = typer.Argument(..., help="new directory for the CA, server and client certificates"),
    server_hosts: str = typer.Option(
        ..., "--server-hosts", help="comma-separated names and IPs clients use as --hostname (SANs)"
    ),
    client_name: str = typer.Option(..., "--client-name", help="the client certificate's CN"),
    key_type: str = KEY_TYPE,
    days: int = DAYS,
    ca_days: int = typer.Option(3650, "--ca-days", min=1, help="validity of the CA certificate"),
) -> None:
    """Make a CA, a server and a client certificate that pass the policy, with owner-only permissions."""
    hosts = _hosts(server_hosts)
    result: pki.InitResult = _pki_action(
        pki.init, directory, hosts, client_name, _key_type(key_type), days, ca_days
    )
    server, client = result.server.directory, result.client.directory
    print(f"Made a CA, a server and a client certificate in {directory} ({key_type}, valid {days} days):")
    print(f"  {result.ca_dir}/      ca.crt, ca.key: keep here; it issues and revokes certificates")
    print(f"  {server}/  ca.crt, server.crt, server.key: for {', '.join(san_names(result.server.cert))}")
    print(f"  {client}/  ca.crt, client.crt, client.key: for client '{client_name}'")
    print("Copy the server directory to each daemon host (mode 700) and start:")
    print(f"  dynolog --certs-dir {server} --listen-address 0.0.0.0")
    print("Copy the client directory to the user's machine and run:")
    print(f"  dyno --hostname {hosts[0] if hosts else 'HOST'} --certs-dir {client} status")


def issue(
    directory: Path = typer.Argument(..., help="the directory `dyno certs init` made"),
    client_name: Optional[str] = typer.Option(None, "--client-name", help="a new client certificate's CN"),
    server_hosts: Optional[str] = typer.Option(None, "--server-hosts", help="a new server's names and IPs"),
    out: Optional[Path] = typer.Option(None, "--out", help="where to write it (default DIR/client-NAME)"),
    key_type: str = KEY_TYPE,
    days: int = DAYS,
    key_password_file: Optional[Path] = PASSWORD_FILE,
) -> None:
    """Issue one more client or server certificate from the CA in DIR."""
    if (client_name is None) == (server_hosts is None):
        raise CliError("give exactly one of --client-name NAME or --server-hosts HOSTS", EXIT_USAGE)
    role, names = (Role.CLIENT, [client_name]) if client_name else (Role.SERVER, _hosts(server_hosts or ""))
    leaf: pki.LeafDir = _pki_action(
        pki.issue, directory, role, names, _passwords(key_password_file), out, _key_type(key_type), days
    )
    print(
        f"Made {role.value} certificate '{names[0]}' in {leaf.directory} (valid until "
        f"{when(leaf.cert.not_valid_after_utc)})"
    )


def revoke(
    directory: Path = typer.Argument(..., help="the directory `dyno certs init` made"),
    client_name: List[str] = typer.Option([], "--client-name", help="revoke this client's certificates"),
    serial: List[str] = typer.Option([], "--serial", help="revoke this serial number (hex)"),
    crl_days: int = typer.Option(365, "--crl-days", min=1, help="validity of the new CRL"),
    key_password_file: Optional[Path] = PASSWORD_FILE,
) -> None:
    """Revoke client certificates: rewrite DIR/ca/ca.crl and copy it into the server directories."""
    if not client_name and not serial:
        raise CliError(
            "give --client-name NAME or --serial HEX (to renew the CRL alone: dyno certs crl)", EXIT_USAGE
        )
    try:
        serials = [int(s, 16) for s in serial]
    except ValueError:
        raise CliError(
            f"--serial {' '.join(serial)}: expected hexadecimal serial numbers", EXIT_USAGE
        ) from None
    result: pki.RevokeResult = _pki_action(
        pki.revoke, directory, _passwords(key_password_file), client_name, serials, crl_days
    )
    for cert in result.revoked:
        print(f"Revoked '{common_name(cert)}' (serial {cert.serial_number:X})")
    if not result.revoked:
        print("Nothing new to revoke: already listed")
    _report_crl(result)


def crl(
    directory: Path = typer.Argument(..., help="the directory `dyno certs init` made"),
    crl_days: int = typer.Option(365, "--crl-days", min=1, help="validity of the new CRL"),
    key_password_file: Optional[Path] = PASSWORD_FILE,
) -> None:
    """Re-issue the CRL with the same revocations and a new validity (daemons refuse an expired one)."""
    _report_crl(_pki_action(pki.revoke, directory, _passwords(key_password_file), crl_days=crl_days))


def _report_crl(result: pki.RevokeResult) -> None:
    print(f"Wrote {result.crl_path} (valid until {when(result.next_update)})")
    for copy in result.copies:
        print(f"  copied to {copy}/ca.crl")
    print("Copy it next to ca.crt in every daemon's --certs-dir; dynolog re-reads it on change, no restart.")


def check(
    ctx: typer.Context,
    directory: Path = typer.Argument(..., help="a --certs-dir, a CA directory, or the directory init made"),
    key_password_file: Optional[Path] = PASSWORD_FILE,
) -> None:
    """Check certificates against the policy dynolog and dyno enforce; explain every problem (exit 1)."""
    target: Target = ctx.obj
    found = material.detect(directory)
    if not found:
        raise CliError(
            f"{directory}: no ca.crt, server.crt or client.crt here or in its subdirectories", EXIT_FAILED
        )
    passwords = _passwords(key_password_file, "DYNOLOG_KEY_PASSWORD")
    reports = [_inspect(path, role, passwords) for path, role in found]
    if target.json:
        print_json(reports)
    else:
        for report in reports:
            _print_report(report)
    if any(report["errors"] for report in reports):
        raise typer.Exit(EXIT_FAILED)


def _inspect(directory: Path, role: Role, passwords: PasswordSource) -> Dict[str, Any]:
    _, violations = material.inspect(directory, role, passwords, strict_key=False)
    report: Dict[str, Any] = {"directory": str(directory), "role": role.value}
    _, certs = material.read_certificates(directory / material.own_files(role)[0], "", [])
    if certs:
        report["subject"] = certs[0].subject.rfc4514_string()
        report["not_after"] = when(certs[0].not_valid_after_utc)
        report["names"] = san_names(certs[0])
    report["errors"] = [_as_dict(v) for v in errors(violations)]
    report["warnings"] = [_as_dict(v) for v in violations if not v.is_error]
    return report


def _as_dict(v: Violation) -> Dict[str, str]:
    return {"file": v.file, "field": v.field, "problem": v.problem, "needed": v.needed, "text": str(v)}


def _print_report(report: Dict[str, Any]) -> None:
    problems = report["errors"] + report["warnings"]
    if report["errors"]:
        count = len(report["errors"])
        print(f"{report['directory']}: {count} problem{'s' if count > 1 else ''} ({report['role']})")
    else:
        names = f" for {', '.join(report['names'])}" if report.get("names") else ""
        print(
            f"{report['directory']}: OK, {report['role']} {report['subject']}{names}, valid until "
            f"{report['not_after']}"
        )
    for problem in problems:
        print(f"  {problem['text']}")


COMMANDS = (("init", init), ("issue", issue), ("check", check), ("revoke", revoke), ("crl", crl))
