"""``dyno service``: the inference service profiler's recordings (MindIE's service profiler, recorded by
the plugin), read offline: no daemon needed.

dyno service export --input-path ~/.ms_server_profiler --output-path ./out --format json csv db
"""

from __future__ import annotations

import argparse
import sys
from argparse import Namespace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Sequence

from ..cli import Command, Flag
from ..exits import EXIT_FAILED, EXIT_USAGE, CliError
from ..output import print_json
from ..target import Target

if TYPE_CHECKING:
    from ..service_export import Inputs, Recording

FORMATS = ("json", "csv", "db")  # as dyno.service_export.FORMATS, which --help must not import


def format_list(text: str) -> List[str]:
    """``json,csv`` (or ``"json csv"``): formats out of FORMATS."""
    formats = text.replace(",", " ").split()
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(FORMATS)}, got {text!r}")
    return formats


EXPORT_FLAGS = (
    Flag("--input-path", None, Path, None, "a prof_dir: every recording under it is read", required=True),
    Flag("--output-path", None, Path, "./output", "directory for the files (made if missing)"),
    Flag(
        "--format",
        None,
        format_list,
        (),
        "json, csv, db, or several: --format json csv db, json,csv,db or --format json --format csv"
        " (default: all three)",
        repeat=True,
    ),
    # `--format json csv db` as MindIE's parse takes it: argparse gives the words after the first here.
    Flag("formats", None, str, None, "more --format values, as in --format json csv db", repeat=True),
)


def _formats(args: Namespace) -> List[str]:
    given: List[List[str]] = args.format
    more: Sequence[str] = args.formats or ()
    if more and not given:
        raise CliError(f"{' '.join(more)}: unexpected; formats follow --format", EXIT_USAGE)
    try:
        formats = [f for values in given for f in values] + [f for word in more for f in format_list(word)]
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"--format: {exc}", EXIT_USAGE) from None
    return formats or list(FORMATS)


def export(target: Target, args: Namespace) -> None:
    """Export a service profiler recording (a prof_dir) as a trace, CSV tables and one database.

    dyno service export --input-path ~/.ms_server_profiler --output-path ./out --format json csv db
      -> out/chrome_tracing.json (Perfetto), out/request.csv, out/span.csv, out/metric.csv, out/profiler.db

    Reads every Trace_Service/ms_service_*.db under --input-path (every dated folder, every process)
    and the ascend_service_profiler_*.db beside them (operator timing); needs no daemon.
      json: chrome_tracing.json for https://ui.perfetto.dev or chrome://tracing: spans, events,
            metrics as counters, operators, and each request's path across processes as a flow
      csv:  request.csv (one row per request id), span.csv, metric.csv
      db:   profiler.db, every table of every process in one SQLite file, with host and pid columns
    A database still being written (its -wal file exists) is refused: set "enable": 0 first.
    Prints one line per database read on stderr (with --json, a summary on stdout instead).
    """
    from .. import service_export as se

    formats = _formats(args)
    root: Path = args.input_path.expanduser()
    output: Path = args.output_path.expanduser()
    if not root.is_dir():
        raise CliError(f"--input-path {root}: no such directory", EXIT_FAILED)
    inputs = se.find_inputs(root)
    if not inputs.all:
        raise CliError(
            f"no recording under {root}: looked for */{se.TRACE_DIR}/{se.SERVICE_PREFIX}*.db and"
            f" {se.OPERATOR_PREFIX}*.db in every folder below it",
            EXIT_FAILED,
        )
    progress = (lambda line: None) if target.json else (lambda line: print(line, file=sys.stderr))
    try:
        se.check_finished(inputs.all)
        recording = se.read_all(inputs, progress)
        se.check_finished(inputs.all)  # one that started again while read
        written = se.write(recording, output, formats)
    except se.ExportError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    except OSError as exc:
        raise CliError(f"{exc.filename or output}: {exc.strerror or exc}", EXIT_FAILED) from None
    if target.json:
        print_json(_summary(inputs, recording, root, output, written))
        return
    for path in written:
        print(f"wrote {path}")


def _summary(
    inputs: Inputs, recording: Recording, root: Path, output: Path, written: List[Path]
) -> Dict[str, Any]:
    from ..service_export import requests

    return {
        "input_path": str(root),
        "output_path": str(output),
        "inputs": [str(p) for p in inputs.all],
        "processes": [p.label for p in recording.processes()],
        "rows": {
            "spans": len(recording.spans),
            "events": len(recording.events),
            "metrics": len(recording.metrics),
            "links": len(recording.links),
            "api": len(recording.api),
            "kernel": len(recording.kernel),
        },
        "requests": len(requests(recording)),
        "written": [str(p) for p in written],
    }


COMMANDS = (Command("export", export, EXPORT_FLAGS),)
