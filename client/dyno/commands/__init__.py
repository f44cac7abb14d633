"""Every ``dyno`` subcommand, in the order ``dyno --help`` lists them: one module each, with its flags
(``FLAGS``) and a short ``run``, whose ``COMMAND`` is listed here by name, summary and module.

``dyno --help`` and usage errors import none of the modules, only this list; running a command (or
``dyno COMMAND --help``) imports its one module. The modules import gRPC and protobuf (``dynoproto``)
inside the functions that call the daemon, not at their top, so that a command's own ``--help`` and
usage errors do not pay for those either. tests/test_cli.py holds each summary to its command's help.
"""

from __future__ import annotations

from typing import Sequence

from ..flags import Command, Entry, Group, Listed


def _certs() -> Sequence[Command]:
    from . import certs

    return certs.COMMANDS


def _service() -> Sequence[Command]:
    from . import service

    return service.COMMANDS


COMMANDS: Sequence[Entry] = (
    Listed(
        "status",
        "Daemon health and counts: version, uptime, IPC endpoints, registered processes.",
        f"{__name__}.status",
    ),
    Listed("version", "Print the daemon's version (and this CLI's).", f"{__name__}.version"),
    Listed(
        "processes",
        "List registered processes: pid (and host pid inside containers), job, rank, devices, client, state.",
        f"{__name__}.processes",
    ),
    Listed(
        "nputrace",
        "Trace steps of running processes: torch_npu/MindSpore on Ascend, torch.profiler elsewhere.",
        f"{__name__}.nputrace",
    ),
    Listed(
        "gputrace",
        "Trace running PyTorch processes the way dynolog does (stock Kineto writes the file itself).",
        f"{__name__}.gputrace",
    ),
    Listed(
        "trace",
        "Show where one trace stands in each process, or (no id) list the recent traces and their ids.",
        f"{__name__}.trace",
    ),
    Listed(
        "dynamic",
        "Start and stop collection windows at a prompt, as often as needed (msprof's dynamic mode).",
        f"{__name__}.dynamic",
    ),
    Listed(
        "npu-monitor",
        "Always-on monitoring of kernel / API / communication / marker durations in running processes.",
        f"{__name__}.npu_monitor",
    ),
    Listed(
        "incidents",
        "Incidents npu-monitor's --auto-trace raised on this node, oldest first; 'show ID' for one.",
        f"{__name__}.incidents",
    ),
    Listed(
        "respond",
        "An Alertmanager webhook receiver: each alert's job traced on every rank at the same steps.",
        f"{__name__}.respond",
    ),
    Group("service", "Export the inference service profiler's recordings (offline).", _service),
    Group("certs", "Make, check and revoke the certificates for mutual TLS (--certs-dir).", _certs),
)
