"""Build the fake MSPTI library (a test double of the hardware API) with the system C compiler.

``build(directory)`` compiles ``fake_mspti.c`` into ``directory/libmspti.so``; :func:`shared_library`
builds it once per process into a temporary directory removed at exit. Both raise :class:`NoCompiler`
(with the reason) where there is no C compiler at all, so tests can skip there (never in CI: see
``tests/conftest.py``); a compiler that fails raises RuntimeError, and the tests fail. Standard library
only: the plugin's tests use it under Python 3.8 too.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Optional

SOURCE = Path(__file__).resolve().parent / "fake_mspti.c"
_shared: Optional[str] = None


class NoCompiler(RuntimeError):
    pass


def compiler() -> str:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    raise NoCompiler("no C compiler (cc, gcc or clang) on PATH to build the fake libmspti.so")


def build(directory: str) -> str:
    """Compile into *directory*; returns the library's path."""
    out = os.path.join(directory, "libmspti.so")
    cmd = [compiler(), "-O2", "-shared", "-fPIC", "-pthread", "-o", out, str(SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:  # a compiler that fails is a broken test double, never a reason to skip
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return out


def shared_library() -> str:
    """The library, built once for this process."""
    global _shared
    if _shared is None:
        directory = tempfile.mkdtemp(prefix="fake-mspti-")
        atexit.register(shutil.rmtree, directory, True)
        _shared = build(directory)
    return _shared


def settings(**values: object) -> Dict[str, str]:
    """``FAKE_MSPTI_*`` variables from keyword arguments: ``settings(count=10)`` → FAKE_MSPTI_COUNT=10."""
    return {f"FAKE_MSPTI_{k.upper()}": str(v) for k, v in values.items()}
