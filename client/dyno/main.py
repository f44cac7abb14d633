"""``dyno``: the command line. Global options come before the subcommand, as in dynolog's dyno, or
after it.

dyno --hostname node01 --certs-dir ./pki/client status
dyno dynamic --pid 4242 --output /data/prof --json

Every failure is a :class:`~dyno.exits.CliError`, printed here as ``dyno: message`` on stderr with its
exit code.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from . import __version__
from .cli import Flag, dispatch, group_parser
from .commands import COMMANDS
from .exits import CliError
from .target import KEY_PASSWORD_ENV, NO_CERTS, Target

HELP = "Talk to the dynolog daemon of a node: health, registered processes, traces and monitoring."

GLOBAL_FLAGS = (
    Flag("--hostname", "hostname", str, "localhost", "host running dynolog"),
    Flag("--port", "port", int, 1778, "dynolog's gRPC port", minimum=1, maximum=65535),
    Flag(
        "--certs-dir",
        "certs_dir",
        str,
        None,
        f"directory with ca.crt, client.crt, client.key for mutual TLS, or {NO_CERTS}",
    ),
    Flag(
        "--key-password-file",
        "key_password_file",
        str,
        None,
        f"file with the password of an encrypted client.key (or ${KEY_PASSWORD_ENV})",
    ),
    Flag("--timeout", "timeout", float, 10.0, "seconds to wait for the daemon", minimum=0.1),
    Flag("--json", "json", bool, False, "machine-readable JSON on stdout, nothing else"),
    Flag("--version", None, bool, False, "print dyno's version and exit"),
)


def main(argv: Optional[Sequence[str]] = None) -> None:
    try:
        _dyno(sys.argv[1:] if argv is None else argv)
    except CliError as exc:
        print(f"dyno: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


def _dyno(argv: Sequence[str]) -> None:
    parser = group_parser("dyno", HELP, COMMANDS, GLOBAL_FLAGS)
    args = parser.parse_args(argv)
    if args.version:
        print(f"dyno {__version__}")
        return
    target = Target(**{flag.field: getattr(args, flag.dest) for flag in GLOBAL_FLAGS if flag.field})
    dispatch(parser, COMMANDS, args, target, [flag for flag in GLOBAL_FLAGS if flag.field])


if __name__ == "__main__":
    main()
