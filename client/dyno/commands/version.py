"""``dyno version``: versions of this CLI and of the daemon it reaches."""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any, Dict

from .. import __version__
from ..cli import Command
from ..fleet.target import Target
from ..output import as_dict, print_json

if TYPE_CHECKING:
    from dynoproto import dynolog_pb2 as pb


def run(target: Target, args: Namespace) -> None:
    """Print the daemon's version (and this CLI's)."""
    version = ask(target)
    if target.json:
        print_json(to_json(version))
        return
    python = f", python {version.python}" if version.python else ""  # a C++ daemon has none
    print(f"dynolog {version.version} (api {version.api}{python})")
    print(f"dyno {__version__}")


def across(target: Target, args: Namespace) -> None:
    from ..fleet import fanout

    view = fanout.View(("DYNOLOG", "API", "PYTHON"), lambda v: [[v.version, v.api, v.python]], to_json)
    fanout.run(target, ask, view)


def ask(target: Target) -> pb.GetVersionResponse:
    """The daemon's version; a C++ daemon's (dyno.edge.legacy) names its API as the legacy JSON RPC."""
    from dynoproto import dynolog_pb2 as pb

    from ..edge import legacy_commands
    from ..edge.connection import connect
    from ..edge.legacy import LegacyDaemon

    try:
        with connect(target, "dyno version") as stub:
            return stub.GetVersion(pb.GetVersionRequest(), timeout=target.timeout)
    except LegacyDaemon as old:
        return pb.GetVersionResponse(
            version=legacy_commands.version(old.host), api=f"legacy JSON RPC ({old.host.flavor})"
        )


def to_json(version: pb.GetVersionResponse) -> Dict[str, Any]:
    return {"cli": __version__, "daemon": as_dict(version)}


COMMAND = Command("version", run, across=across)
