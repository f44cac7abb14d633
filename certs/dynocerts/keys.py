"""Private keys: PKCS#1 or PKCS#8, plain or encrypted, readable by their owner only.

A password never comes from a command-line argument (other users see argv in /proc): it comes from a
file, from the environment, or from a prompt when a terminal is attached.
"""

from __future__ import annotations

import enum
import getpass
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from .policy import Severity, Violation


class KeyProblem(enum.Enum):
    UNREADABLE = "unreadable"
    PERMISSIONS = "permissions"
    NEEDS_PASSWORD = "needs password"
    WRONG_PASSWORD = "wrong password"
    INVALID = "invalid"


class KeyLoadError(Exception):
    def __init__(self, violation: Violation, problem: KeyProblem) -> None:
        super().__init__(str(violation))
        self.violation = violation
        self.problem = problem


@dataclass(frozen=True)
class Password:
    value: bytes
    origin: str  # for messages: where it came from


@dataclass(frozen=True)
class PasswordSource:
    """Where a key's password may come from, in this order: file, environment, prompt."""

    file: Optional[Path] = None
    env_vars: Tuple[str, ...] = ()
    prompt: bool = True

    def password(self, key_file: str) -> Optional[Password]:
        if self.file is not None:
            return Password(_read_password_file(self.file), f"--key-password-file {self.file}")
        for name in self.env_vars:
            value = os.environ.get(name)
            if value:
                return Password(value.encode(), f"${name}")
        if self.prompt and sys.stdin.isatty():
            return Password(getpass.getpass(f"Password for {key_file}: ").encode(), "the prompt")
        return None

    def hint(self) -> str:
        env = " or ".join(f"${name}" for name in self.env_vars)
        return f"needs --key-password-file FILE{f' or {env}' if env else ''} (or a terminal to be asked on)"


def owner_only(path: Path, what: str) -> Optional[Violation]:
    """A violation when group or others may read *path*; the fix is in the message."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & 0o077:
        return None
    return Violation(
        str(path), "permissions", f"{mode:04o} lets group/others read the {what}", f"run: chmod 600 {path}"
    )


def _read_password_file(path: Path) -> bytes:
    try:
        loose = owner_only(path, "password")
        data = path.read_bytes()
    except OSError as exc:
        raise KeyLoadError(
            Violation(str(path), "password file", exc.strerror or "unreadable", "needs a readable file"),
            KeyProblem.UNREADABLE,
        ) from None
    if loose is not None:
        raise KeyLoadError(loose, KeyProblem.PERMISSIONS)
    # One trailing newline is what `echo pw > file` adds, not part of the password.
    data = data.removesuffix(b"\n").removesuffix(b"\r")
    if not data:
        raise KeyLoadError(
            Violation(str(path), "password file", "empty", "needs the key's password"), KeyProblem.INVALID
        )
    return data


def is_encrypted(pem: bytes) -> bool:
    # PKCS#8 says "BEGIN ENCRYPTED PRIVATE KEY"; PKCS#1 (OpenSSL traditional) says "Proc-Type: 4,ENCRYPTED".
    return b"ENCRYPTED" in pem


def load_private_key(path: Path, passwords: PasswordSource) -> PrivateKeyTypes:
    file = str(path)
    try:
        loose = owner_only(path, "private key")
        pem = path.read_bytes()
    except OSError as exc:
        raise KeyLoadError(
            Violation(file, "file", exc.strerror or "unreadable", "needs the private key (PEM)"),
            KeyProblem.UNREADABLE,
        ) from None
    if loose is not None:
        raise KeyLoadError(loose, KeyProblem.PERMISSIONS)
    password = passwords.password(file) if is_encrypted(pem) else None
    if is_encrypted(pem) and password is None:
        raise KeyLoadError(
            Violation(file, "private key", "encrypted, and no password was given", passwords.hint()),
            KeyProblem.NEEDS_PASSWORD,
        )
    try:
        return serialization.load_pem_private_key(pem, password.value if password else None)
    except (ValueError, TypeError):
        if password is not None:
            raise KeyLoadError(
                Violation(
                    file,
                    "private key",
                    f"cannot be decrypted with the password from {password.origin}",
                    "needs the password it was encrypted with",
                ),
                KeyProblem.WRONG_PASSWORD,
            ) from None
        raise KeyLoadError(
            Violation(file, "private key", "not a PEM private key", "needs PKCS#1 or PKCS#8 PEM"),
            KeyProblem.INVALID,
        ) from None


def unchecked(error: KeyLoadError, cert_file: str) -> Violation:
    """For ``dyno certs check``: an encrypted key it cannot open is not a fault of the key."""
    v = error.violation
    return Violation(
        v.file, v.field, v.problem, f"not checked against {cert_file}; {v.needed}", Severity.WARNING
    )


def pkcs8_pem(key: PrivateKeyTypes) -> bytes:
    """The decrypted key as gRPC takes it; held in memory only, never written."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
