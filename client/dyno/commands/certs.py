"""``dyno certs``: make, check and revoke the certificates of mutual TLS between dyno and dynolog.

dyno certs init ./pki --server-hosts node01,10.0.0.5 --client-name alice
dyno certs check ./pki
dyno certs revoke ./pki --client-name alice
"""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from typing import Any, Dict, Optional

from dynocerts import material, pki
from dynocerts.keys import PasswordSource
from dynocerts.make import DEFAULT_KEY_TYPE, KEY_TYPES, Terms
from dynocerts.policy import Role, Violation, common_name, errors, san_names, when
from msmonitor_contract.vocabulary import split_list

from ..exits import EXIT_FAILED, EXIT_USAGE, CliError
from ..flags import Command, Flag
from ..fleet.target import KEY_PASSWORD_ENV, Target
from ..output import print_json

# dyno's global --key-password-file is the client key's; these commands take the CA's (or a checked key's).
PASSWORD_FILE = Flag(
    "--key-password-file",
    None,
    Path,
    None,
    f"file with the password of an encrypted key (or ${KEY_PASSWORD_ENV})",
)
DIRECTORY = Flag("directory", None, Path, None, "the directory `dyno certs init` made")
KEY_TYPE = Flag("--key-type", None, str, DEFAULT_KEY_TYPE, f"one of {', '.join(KEY_TYPES)}")
DAYS = Flag("--days", None, int, 365, "validity of the server and client certificates", minimum=1)
CRL_DAYS = Flag("--crl-days", None, int, 365, "validity of the new CRL", minimum=1)
INIT_FLAGS = (
    DIRECTORY._replace(help="new directory for the CA, server and client certificates"),
    Flag(
        "--server-hosts",
        None,
        split_list,
        None,
        "comma-separated names and IPs clients use as --hostname (SANs)",
        required=True,
    ),
    Flag("--client-name", None, str, None, "the client certificate's CN", required=True),
    KEY_TYPE,
    DAYS,
    Flag("--ca-days", None, int, 3650, "validity of the CA certificate", minimum=1),
)
ISSUE_FLAGS = (
    DIRECTORY,
    Flag("--client-name", None, str, None, "a new client certificate's CN"),
    Flag("--server-hosts", None, split_list, None, "a new server's names and IPs"),
    Flag("--out", None, Path, None, "where to write it (default DIR/client-NAME)"),
    KEY_TYPE,
    DAYS,
    PASSWORD_FILE,
)
REVOKE_FLAGS = (
    DIRECTORY,
    Flag("--client-name", None, str, (), "revoke this client's certificates", repeat=True),
    Flag("--serial", None, str, (), "revoke this serial number (hex)", repeat=True),
    CRL_DAYS,
    PASSWORD_FILE,
)
CHECK_FLAGS = (
    DIRECTORY._replace(help="a --certs-dir, a CA directory, or the directory init made"),
    PASSWORD_FILE,
)


def _passwords(password_file: Optional[Path], *extra_env: str) -> PasswordSource:
    return PasswordSource(password_file, (KEY_PASSWORD_ENV, *extra_env))


def _key_type(key_type: str) -> str:
    if key_type not in KEY_TYPES:
        raise CliError(f"--key-type {key_type}: choose one of {', '.join(KEY_TYPES)}", EXIT_USAGE)
    return key_type


def _pki_action(action: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return action(*args, **kwargs)
    except pki.PkiError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None


def init(target: Target, args: Namespace) -> None:
    """Make a CA, a server and a client certificate that pass the policy, with owner-only permissions."""
    hosts, directory, days = args.server_hosts, args.directory, args.days
    result: pki.InitResult = _pki_action(
        pki.init, directory, hosts, args.client_name, Terms(_key_type(args.key_type), days), args.ca_days
    )
    server, client = result.server.directory, result.client.directory
    print(
        f"Made a CA, a server and a client certificate in {directory} ({args.key_type}, valid {days} days):"
    )
    print(f"  {result.ca_dir}/      ca.crt, ca.key: keep here; it issues and revokes certificates")
    print(f"  {server}/  ca.crt, server.crt, server.key: for {', '.join(san_names(result.server.cert))}")
    print(f"  {client}/  ca.crt, client.crt, client.key: for client '{args.client_name}'")
    print("Copy the server directory to each daemon host (mode 700) and start:")
    print(f"  dynolog --certs-dir {server} --listen-address 0.0.0.0")
    print("Copy the client directory to the user's machine and run:")
    print(f"  dyno --hostname {hosts[0] if hosts else 'HOST'} --certs-dir {client} status")


def issue(target: Target, args: Namespace) -> None:
    """Issue one more client or server certificate from the CA in DIR."""
    if (args.client_name is None) == (args.server_hosts is None):
        raise CliError("give exactly one of --client-name NAME or --server-hosts HOSTS", EXIT_USAGE)
    role, names = (
        (Role.CLIENT, [args.client_name]) if args.client_name else (Role.SERVER, args.server_hosts or [])
    )
    passwords = _passwords(args.key_password_file)
    request = pki.LeafRequest(role, names, args.out)
    terms = Terms(_key_type(args.key_type), args.days)
    leaf: pki.LeafDir = _pki_action(pki.issue, args.directory, passwords, request, terms)
    print(
        f"Made {role.value} certificate '{names[0]}' in {leaf.directory} (valid until "
        f"{when(leaf.cert.not_valid_after_utc)})"
    )


def revoke(target: Target, args: Namespace) -> None:
    """Revoke client certificates: rewrite DIR/ca/ca.crl and copy it into the server directories."""
    client_name, serial = args.client_name, args.serial
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
        pki.revoke, args.directory, _passwords(args.key_password_file), client_name, serials, args.crl_days
    )
    for cert in result.revoked:
        print(f"Revoked '{common_name(cert)}' (serial {cert.serial_number:X})")
    if not result.revoked:
        print("Nothing new to revoke: already listed")
    _report_crl(result)


def crl(target: Target, args: Namespace) -> None:
    """Re-issue the CRL with the same revocations and a new validity (daemons refuse an expired one)."""
    passwords = _passwords(args.key_password_file)
    _report_crl(_pki_action(pki.revoke, args.directory, passwords, crl_days=args.crl_days))


def _report_crl(result: pki.RevokeResult) -> None:
    print(f"Wrote {result.crl_path} (valid until {when(result.next_update)})")
    for copy in result.copies:
        print(f"  copied to {copy}/ca.crl")
    print("Copy it next to ca.crt in every daemon's --certs-dir; dynolog re-reads it on change, no restart.")


def check(target: Target, args: Namespace) -> None:
    """Check certificates against the policy dynolog and dyno enforce; explain every problem (exit 1)."""
    found = material.detect(args.directory)
    if not found:
        raise CliError(
            f"{args.directory}: no ca.crt, server.crt or client.crt here or in its subdirectories",
            EXIT_FAILED,
        )
    passwords = _passwords(args.key_password_file, "DYNOLOG_KEY_PASSWORD")
    reports = [_inspect(path, role, passwords) for path, role in found]
    if target.json:
        print_json(reports)
    else:
        for report in reports:
            _print_report(report)
    failed = [report["directory"] for report in reports if report["errors"]]
    if failed:
        raise CliError(f"certificates with problems in {', '.join(failed)}", EXIT_FAILED)


def _inspect(directory: Path, role: Role, passwords: PasswordSource) -> Dict[str, Any]:
    _, violations = material.inspect(directory, role, passwords, material.Checks(strict_key=False))
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


COMMANDS = (
    Command("init", init, INIT_FLAGS),
    Command("issue", issue, ISSUE_FLAGS),
    Command("check", check, CHECK_FLAGS),
    Command("revoke", revoke, REVOKE_FLAGS),
    Command("crl", crl, (DIRECTORY, CRL_DAYS, PASSWORD_FILE)),
)
