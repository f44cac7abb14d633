"""``dyno version``: versions of this CLI and of the daemon it reaches."""

from __future__ import annotations

import typer

from dynoproto import dynolog_pb2 as pb

from .. import __version__
from ..connection import Target, connect
from ..output import as_dict, print_json


def run(ctx: typer.Context) -> None:
    """Print the daemon's version (and this CLI's)."""
    target: Target = ctx.obj
    with connect(target) as stub:
        version = stub.GetVersion(pb.GetVersionRequest(), timeout=target.timeout)
    if target.json:
        print_json({"cli": __version__, "daemon": as_dict(version)})
        return
    print(f"dynolog {version.version} (api {version.api}, python {version.python})")
    print(f"dyno {__version__}")
