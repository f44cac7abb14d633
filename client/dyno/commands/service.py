"""``dyno service``: the inference service profiler's recordings (MindIE's service profiler, recorded by
the plugin or by MindIE 8.3 / 26.0 itself), read offline: no daemon needed.

dyno service export --input-path ~/.ms_server_profiler --output-path ./out --format json csv db --summary
"""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Sequence, Tuple

from msmonitor_contract.values import FlagValueError

from ..exits import EXIT_FAILED, EXIT_USAGE, CliError
from ..flags import Command, Flag
from ..fleet.target import Target
from ..output import print_json

if TYPE_CHECKING:
    from ..service_export import Inputs, Recording

FORMATS = ("json", "csv", "db")  # as dyno.service_export.FORMATS, which --help must not import


def format_list(text: str) -> List[str]:
    """``json,csv`` (or ``"json csv"``): formats out of FORMATS."""
    formats = text.replace(",", " ").split()
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise FlagValueError(f"choose from {', '.join(FORMATS)}, got {text!r}")
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
    Flag(
        "--summary",
        None,
        bool,
        False,
        "also request_summary.csv, batch_summary.csv, service_summary.csv (msserviceprofiler analyze's)",
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
    except FlagValueError as exc:
        raise CliError(f"--format: {exc}", EXIT_USAGE) from None
    return formats or list(FORMATS)


def export(target: Target, args: Namespace) -> None:
    """Export a service profiler recording (a prof_dir) as MindIE's analyser does, without CANN.

    dyno service export --input-path ~/.ms_server_profiler --output-path ./out --format json csv db
      -> out/chrome_tracing.json, out/request.csv, batch.csv, forward.csv, kvcache.csv,
         request_status.csv, out/profiler.db (the files of python -m ms_service_profiler.parse)

    Reads every ms_service_*.db under --input-path: MindIE 26.0's and this plugin's (slice tables, in
    <MMDD-HHMM>/Trace_Service/), MindIE 8.3's (Mstx, no Trace_Service/) and msMonitor's earlier ones,
    and the ascend_service_profiler_*.db beside them (operator timing); needs no daemon.
      json: chrome_tracing.json for MindStudio Insight, https://ui.perfetto.dev or chrome://tracing
      csv:  the analyser's CSV files, with its columns and units; one the recording has no rows for is
            not written, and the reason is printed
      db:   profiler.db, the analyser's tables and views
    --summary adds request_summary.csv, batch_summary.csv and service_summary.csv.
    A recording with no marks at all is an error (exit 1), as is a database still open in a writer
    (set "enable": 0 first); -wal/-shm files another reader left behind are fine.
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
            f"no recording under {root}: looked for {se.SERVICE_PREFIX}*.db and {se.OPERATOR_PREFIX}*.db"
            " in every folder below it",
            EXIT_FAILED,
        )
    progress = (lambda line: None) if target.json else (lambda line: print(line, file=sys.stderr))
    try:
        se.check_finished(inputs.all)
        recording = se.read_all(inputs, progress)
        se.check_finished(inputs.all)  # one that started again while read
        _check_not_empty(recording, inputs)
        written, skipped = se.write(recording, output, formats)
        if args.summary:
            written += _summaries(recording, output, skipped)
    except se.ExportError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    except OSError as exc:
        raise CliError(f"{exc.filename or output}: {exc.strerror or exc}", EXIT_FAILED) from None
    if target.json:
        print_json(_report(inputs, recording, (root, output), _Written(written, skipped)))
        return
    for name, why in skipped.items():
        print(f"not written: {output / name}: {why}", file=sys.stderr)
    for path in written:
        print(f"wrote {path}")


def _check_not_empty(recording: Recording, inputs: Inputs) -> None:
    from ..service_export import ExportError

    if not (recording.marks or recording.counters or recording.api or recording.kernel):
        names = ", ".join(str(p) for p in inputs.service) or "no service database"
        raise ExportError(
            f"nothing recorded in {names}: the tables are empty (was recording on, and did the service"
            " call the profiler at its level and domains?)"
        )


def _summaries(recording: Recording, output: Path, skipped: Dict[str, str]) -> List[Path]:
    from ..service_export.reporters.csv_tables import Skipped
    from ..service_export.summary import write_summaries

    try:
        return write_summaries(recording, output)
    except Skipped as why:
        skipped["request_summary.csv"] = str(why)
        return []


class _Written(NamedTuple):
    paths: List[Path]
    skipped: Dict[str, str]  # file name -> why it was not written


def _report(
    inputs: Inputs, recording: Recording, folders: Tuple[Path, Path], written: _Written
) -> Dict[str, Any]:
    """``--json``'s summary: what was read (*folders*: the input and output paths) and written."""
    from ..service_export.model import SPAN

    root, output = folders
    spans = sum(m.kind == SPAN for m in recording.marks)
    return {
        "input_path": str(root),
        "output_path": str(output),
        "inputs": [str(p) for p in inputs.all],
        "layouts": recording.layouts,
        "processes": [p.label for p in recording.processes()],
        "rows": {
            "events": len(recording.marks) - spans,
            "spans": spans,
            "counters": len(recording.counters),
            "api": len(recording.api),
            "kernel": len(recording.kernel),
        },
        "written": [str(p) for p in written.paths],
        "skipped": written.skipped,
    }


COMMANDS = (Command("export", export, EXPORT_FLAGS),)
