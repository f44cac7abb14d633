"""Generate the gRPC stubs of protos/dynoproto/dynolog.proto into a folder (default: beside it).

`make proto` runs it; tests/test_proto_fresh.py runs it into a temporary folder and compares.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
PROTO_DIR = PROTO_ROOT / "dynoproto"
OUTPUTS = ("dynolog_pb2.py", "dynolog_pb2.pyi", "dynolog_pb2_grpc.py")


def generate(out_dir: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # Relative to protos/, the file is dynoproto/dynolog.proto: the generated grpc module imports
        # `dynoproto.dynolog_pb2`.
        args = [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"-I{Path(protoc.__file__).parent / '_proto'}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            str(PROTO_DIR / "dynolog.proto"),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        for name in OUTPUTS:
            shutil.copy(Path(tmp) / "dynoproto" / name, out_dir / name)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_DIR)
