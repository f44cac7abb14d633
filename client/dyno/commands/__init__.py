"""Every ``dyno`` subcommand, in the order ``dyno --help`` lists them: one module each, with its flags
(``FLAGS``) and a short ``run``, registered here as its ``COMMAND``.

The modules import gRPC and protobuf (``dynoproto``) inside the functions that call the daemon, not at
their top: ``dyno --help`` and usage errors import every module here and must not pay for those.
"""

from __future__ import annotations

from typing import Sequence

from ..cli import Command, Entry, Group
from . import dynamic, gputrace, incidents, npu_monitor, nputrace, processes, status, trace, version


def _certs() -> Sequence[Command]:
    from . import certs  # dynocerts loads cryptography: only `dyno certs ...` pays for it

    return certs.COMMANDS


def _service() -> Sequence[Command]:
    from . import service

    return service.COMMANDS


COMMANDS: Sequence[Entry] = (
    *(
        module.COMMAND
        for module in (status, version, processes, nputrace, gputrace, trace, dynamic, npu_monitor, incidents)
    ),
    Group("service", "Export the inference service profiler's recordings (offline).", _service),
    Group("certs", "Make, check and revoke the certificates for mutual TLS (--certs-dir).", _certs),
)
