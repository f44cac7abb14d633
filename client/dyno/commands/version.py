"""``dyno version``: versions of this CLI and of the daemon it reaches."""

from __future__ import annotations

from argparse import Namespace
from typing import Any, Dict

from .. import __version__
from ..flags import Command
from ..fleet.target import Target
from ..model.daemon import GetVersionResponse
from ..output import as_dict, print_json


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


def ask(target: Target) -> GetVersionResponse:
    """The daemon's version; a C++ daemon's (dyno.edge.legacy) names its API as the legacy JSON RPC."""
    from ..edge.rpc import Daemon

    return Daemon(target, "dyno version").version()


def to_json(version: GetVersionResponse) -> Dict[str, Any]:
    return {"cli": __version__, "daemon": as_dict(version)}


COMMAND = Command("version", run, across=across)
