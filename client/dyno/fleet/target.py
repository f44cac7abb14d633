"""The daemon a user named with the global options — or the many, with ``--hosts``, ``--hostfile`` or
``--slurm-job`` — and how to talk to it (plaintext or mutual TLS)."""

from __future__ import annotations

import os
from typing import NamedTuple, Optional

from msmonitor_contract.vocabulary import DEFAULT_PORT

NO_CERTS = "NO_CERTS"
KEY_PASSWORD_ENV = "DYNO_KEY_PASSWORD"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_PARALLEL = 64


class Target(NamedTuple):
    hostname: str = "localhost"
    port: int = DEFAULT_PORT
    certs_dir: Optional[str] = None
    timeout: float = DEFAULT_TIMEOUT_S
    json: bool = False
    key_password_file: Optional[str] = None
    # Fan-out (dyno.fleet.fanout): any of these names the hosts instead of hostname.
    hosts: Optional[str] = None  # a Slurm hostlist: node[001-128],login1
    hostfile: Optional[str] = None
    slurm_job: Optional[str] = None
    parallel: int = DEFAULT_PARALLEL  # hosts asked at once
    name: str = ""  # one host of a fan-out as its list wrote it (``node01:1779``): how it is shown

    @property
    def label(self) -> str:
        return self.name or self.hostname

    @property
    def address(self) -> str:
        host = self.hostname
        return f"[{host}]:{self.port}" if ":" in host and not host.startswith("[") else f"{host}:{self.port}"

    @property
    def local(self) -> bool:
        """The daemon is on this host: its paths are this host's, and it can see a job started here."""
        return self.hostname in LOCAL_HOSTS

    @property
    def tls(self) -> bool:
        return self.certs_dir not in (None, NO_CERTS)

    @property
    def fans_out(self) -> bool:
        return (self.hosts, self.hostfile, self.slurm_job) != (None, None, None)


def absolute_path(target: Target, path: str) -> str:
    """A path given to a daemon (``--log-file``, ``--output``): a relative one means this directory only
    when the daemon is on this host; for another host it stays as given (and validation refuses it)."""
    if not path or path.startswith("/") or not target.local:
        return path
    return os.path.abspath(path)
