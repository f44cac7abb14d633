"""``dyno version``: versions of this CLI and of the daemon it reaches."""

from __future__ import annotations

from argparse import Namespace

from .. import __version__
from ..cli import Command
from ..output import as_dict, print_json
from ..target import Target


def run(target: Target, args: Namespace) -> None:
    """Print the daemon's version (and this CLI's)."""
    from dynoproto import dynolog_pb2 as pb

    from ..connection import connect

    with connect(target) as stub:
        version = stub.GetVersion(pb.GetVersionRequest(), timeout=target.timeout)
    if target.json:
        print_json({"cli": __version__, "daemon": as_dict(version)})
        return
    print(f"dynolog {version.version} (api {version.api}, python {version.python})")
    print(f"dyno {__version__}")


COMMAND = Command("version", run)
