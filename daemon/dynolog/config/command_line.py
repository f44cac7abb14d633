"""The daemon's command line as gflags takes it: ``--flag-name`` and ``--flag_name``, ``-flag`` as well as
``--flag``, a value after ``=`` or as the next argument, booleans as ``--flag``, ``--flag=true`` or
``--noflag``; ``--flagfile`` reads one flag per line as dynolog's systemd unit does. The C++ daemons'
flags that this one does not need are accepted with a warning (:mod:`.upstream`)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Sequence, Set

from .. import __version__
from .flags import boolean
from .settings import DaemonConfig
from .upstream import GFLAGS_TYPES, IGNORED_UPSTREAM_FLAGS


def _spellings(name: str) -> List[str]:
    dashed = "--" + name.replace("_", "-")
    underscored = "--" + name.replace("-", "_")
    return [dashed] if dashed == underscored else [dashed, underscored]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dynolog",
        allow_abbrev=False,  # gflags takes whole names only
        description="Per-node daemon of msMonitor: serves `dyno` over gRPC and the processes of this node "
        "over local IPC.",
        epilog="Flags may be written --flag-name or --flag_name, and as gflags takes them (-flag=value, "
        "-flag value, --noflag). The C++ dynolog's and msMonitor's other flags are accepted with a warning. "
        "Example: dynolog --enable-ipc-monitor --log-file /tmp/dynolog.log",
    )
    for f in dataclasses.fields(DaemonConfig):
        if "flag" not in f.metadata:
            continue
        options = dict(f.metadata["flag"])
        names = options.pop("names") or _spellings(f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.type in ("bool", bool):  # --flag, --flag=true|false (and gflags' --noflag, below)
            options.update(nargs="?", const=True, type=boolean, metavar="BOOL")
        parser.add_argument(*names, dest=f.name, default=default, **options)
    parser.add_argument(
        "--flagfile", help="read flags from this file, one per line (as dynolog's systemd unit does)"
    )
    parser.add_argument("--version", action="version", version=f"dynolog {__version__}")
    for name, upstream in IGNORED_UPSTREAM_FLAGS.items():
        value: Dict[str, Any] = (
            dict(nargs="?", const=True, type=boolean)
            if upstream.is_bool
            else dict(type=GFLAGS_TYPES[upstream.gflags_type])
        )
        parser.add_argument(
            *_spellings(name), dest=f"ignored_{name}", default=None, help=argparse.SUPPRESS, **value
        )
    return parser


_FLAGFILE = ("--flagfile", "-flagfile")


def expand_flagfiles(argv: Sequence[str], within: Sequence[Path] = ()) -> List[str]:
    """Replace each ``--flagfile=F`` (or ``--flagfile F``, ``-flagfile``) with F's flags, one per line,
    blank lines and ``#`` comments skipped; a flagfile may name others, as gflags allows."""
    expanded: List[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, has_value, value = arg.partition("=")
        if name not in _FLAGFILE:
            expanded.append(arg)
            continue
        if not has_value and not args:
            raise SystemExit(f"dynolog: {name} needs a file: {name}=FILE")
        expanded += _read_flagfile(Path(value if has_value else args.pop(0)), within)
    return expanded


def _read_flagfile(path: Path, within: Sequence[Path]) -> List[str]:
    if path.resolve() in within:
        chain = " -> ".join(str(p) for p in (*within, path.resolve()))
        raise SystemExit(f"dynolog: --flagfile {path} includes itself ({chain}); remove the loop")
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SystemExit(f"dynolog: cannot read --flagfile {path}: {exc.strerror}") from None
    flags = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if not text.startswith("-"):  # gflags' per-program sections: a line naming binaries
            raise SystemExit(
                f"dynolog: --flagfile {path} line {number}: {text!r} is not a flag; write one --flag or "
                "--flag=value per line"
            )
        flags.append(text)
    return expand_flagfiles(flags, (*within, path.resolve()))


def _gflags_spellings(argv: Sequence[str], parser: argparse.ArgumentParser) -> List[str]:
    """gflags' spellings in argparse's: ``-flag`` as ``--flag``, and ``--noflag`` (``-noflag``) of a
    boolean as ``--flag=false``. Anything else is left for argparse to accept or refuse by name."""
    options: Set[str] = {option for action in parser._actions for option in action.option_strings}
    booleans = {
        option for action in parser._actions if action.type is boolean for option in action.option_strings
    }
    out = []
    for arg in argv:
        name, has_value, value = arg.partition("=")
        if name.startswith("-") and not name.startswith("--") and "-" + name in options:
            name = "-" + name
        negated = "--" + name.lstrip("-")[2:]
        if (
            not has_value
            and name not in options
            and name.lstrip("-").startswith("no")
            and negated in booleans
        ):
            out.append(negated + "=false")
        else:
            out.append(name + has_value + value)
    return out


def parse_args(argv: Sequence[str]) -> DaemonConfig:
    parser = build_parser()
    ns = parser.parse_args(_gflags_spellings(expand_flagfiles(argv), parser))
    values = {f.name: getattr(ns, f.name) for f in dataclasses.fields(DaemonConfig) if "flag" in f.metadata}
    ignored = [name for name in IGNORED_UPSTREAM_FLAGS if getattr(ns, f"ignored_{name}") is not None]
    return DaemonConfig(**values, ignored_flags=ignored).resolved()
