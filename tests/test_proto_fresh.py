"""The committed gRPC stubs are what `make proto` generates from protos/dynoproto/dynolog.proto."""

import runpy
from pathlib import Path

from harness import REPO


def test_generated_stubs_are_current(tmp_path: Path):
    generator = runpy.run_path(str(REPO / "scripts" / "gen_proto.py"))
    generator["generate"](tmp_path)
    for name in generator["OUTPUTS"]:
        committed = (REPO / "protos" / "dynoproto" / name).read_text()
        assert (tmp_path / name).read_text() == committed, (
            f"protos/dynoproto/{name} is stale: run `make proto`"
        )
