"""The hosts a fan-out reaches, from what clusters already have: a Slurm hostlist (``--hosts``), a host
file (``--hostfile``), the nodes of a Slurm job (``--slurm-job``).

Hostlists are expanded by python-hostlist, the library Slurm sites use for the same syntax
(``node[001-004,010]``, ``rack[1-2]-n[01-08]``, comma lists); a host may name its daemon's port
(``node[01-04]:1779``), else ``--port`` is used. A job's nodes come from Slurm itself:
``scontrol show job`` for its node list, ``scontrol show hostnames`` to expand it.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import List, Optional, Sequence, Tuple

from msmonitor_contract.numbers import strict_int

from ..exits import EXIT_USAGE, CliError

SCONTROL_TIMEOUT_S = 30.0
_NODE_LIST = re.compile(r"(?:^|\s)NodeList=(\S+)")  # not ReqNodeList= or ExcNodeList=


def resolve(hosts: Optional[str], hostfile: Optional[str], slurm_job: Optional[str]) -> List[str]:
    """Every host named by the three flags, in the order given, each once; at least one."""
    names: List[str] = []
    if hosts is not None:
        names += expand(hosts, "--hosts")
    if hostfile is not None:
        names += read_hostfile(hostfile)
    if slurm_job is not None:
        names += slurm_job_hosts(slurm_job)
    if not names:
        raise CliError("no hosts: --hosts, --hostfile and --slurm-job named none", EXIT_USAGE)
    return list(dict.fromkeys(names))


def expand(hostlist: str, where: str) -> List[str]:
    """``node[001-003],login`` as its host names; *where* names the flag (or file line) in an error."""
    slurm_hostlist = _hostlist()
    try:
        return list(slurm_hostlist.expand_hostlist(hostlist))
    except slurm_hostlist.BadHostlist as exc:
        raise CliError(
            f"{where}: {hostlist!r} is not a hostlist ({exc}); write e.g. 'node[001-016]' or 'node1,node2'",
            EXIT_USAGE,
        ) from None


def split_port(entry: str, default: int) -> Tuple[str, int]:
    """``node01:1779`` as ``("node01", 1779)``; a host without a port gets *default* (``--port``). An IPv6
    address takes no port here (brackets are the hostlist's ranges)."""
    host, colon, port = entry.rpartition(":")
    if not colon or ":" in host:
        return entry, default
    number = strict_int(port)
    if number is None or not 0 < number < 65536:
        raise CliError(f"{entry!r}: the port after ':' must be a number from 1 to 65535", EXIT_USAGE)
    return host, number


def as_hostlist(names: Sequence[str]) -> str:
    """Host names as one hostlist, as Slurm writes them: ``node[001-003,007]``."""
    return str(_hostlist().collect_hostlist(list(names)))


def read_hostfile(path: str) -> List[str]:
    """One host per line (a hostlist also does), blank lines and ``#`` comments ignored."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise CliError(f"--hostfile: cannot read {path}: {exc.strerror}", EXIT_USAGE) from None
    except UnicodeDecodeError:
        raise CliError(f"--hostfile: {path} is not a text file", EXIT_USAGE) from None
    hosts: List[str] = []
    for number, line in enumerate(lines, 1):
        entry = line.split("#", 1)[0].strip()
        if entry:
            hosts += expand(entry, f"--hostfile {path}, line {number}")
    return hosts


def slurm_job_hosts(job_id: str) -> List[str]:
    """The nodes Slurm allocated to *job_id* (every task of an array job)."""
    nodelists = _NODE_LIST.findall(_scontrol("show", "job", "--oneliner", job_id))
    allocated = [n for n in nodelists if n != "(null)"]
    if not allocated:
        raise CliError(
            f"--slurm-job {job_id}: the job has no nodes yet (it is pending) or any more; "
            f"`squeue -j {job_id}` shows its state",
            EXIT_USAGE,
        )
    return _scontrol("show", "hostnames", ",".join(allocated)).split()


def _scontrol(*args: str) -> str:
    import subprocess

    command = ["scontrol", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S)
    except FileNotFoundError:
        raise CliError(
            "--slurm-job needs Slurm's scontrol, and there is none on PATH here: run dyno on a node of "
            "the Slurm cluster (a login node), or name the hosts with --hosts or --hostfile",
            EXIT_USAGE,
        ) from None
    except subprocess.TimeoutExpired:
        raise CliError(
            f"{' '.join(command)}: no answer within {SCONTROL_TIMEOUT_S:.0f}s", EXIT_USAGE
        ) from None
    if done.returncode != 0:
        why = done.stderr.strip() or f"exit status {done.returncode}"
        raise CliError(f"{' '.join(command)}: {why}", EXIT_USAGE)
    return done.stdout


def _hostlist() -> ModuleType:
    import hostlist  # type: ignore[import-untyped]  # python-hostlist has no type hints; only fan-outs load it

    return hostlist
