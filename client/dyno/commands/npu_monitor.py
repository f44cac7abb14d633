"""``dyno npu-monitor``: start, change or stop always-on monitoring; watch it live; see who runs it."""

from __future__ import annotations

import sys
import time
from argparse import Namespace
from typing import TYPE_CHECKING, Dict, List, Tuple

from msmonitor_plugin.vocabulary import (
    DEFAULT_MONITOR_EXPORT,
    DEFAULT_MONITOR_KINDS,
    DEFAULT_REPORT_INTERVAL_S,
    DEFAULT_TOP_N,
    split_list,
)

from ..cli import TARGETING, Command, Flag, fill
from ..output import as_dict, print_json, rank_text, table
from ..target import Target

if TYPE_CHECKING:
    from dynoproto import dynolog_pb2 as pb

CLEAR = "\033[H\033[2J"
FLAGS = (
    Flag("--npu-monitor-start", "start", bool, False, "start monitoring"),
    Flag("--npu-monitor-stop", "stop", bool, False, "stop monitoring (flush and tear down)"),
    Flag(
        "--report-interval-s",
        "report_interval_s",
        int,
        DEFAULT_REPORT_INTERVAL_S,
        "seconds per report (0: unchanged)",
        minimum=0,
    ),
    Flag("--duration", "duration_s", float, 0.0, "stop by itself after this many seconds (0: never)"),
    Flag(
        "--mspti-activity-kind",
        "activity_kinds",
        split_list,
        DEFAULT_MONITOR_KINDS,
        "comma-separated: Marker, Kernel, API, Hccl, Memory, MemSet, MemCpy, Communication, AclAPI, "
        "NodeAPI, RuntimeAPI",
    ),
    Flag("--filter", "filter", str, "", "keep only names containing…: 'Kernel:matmul,conv;API:acl'"),
    Flag("--log-file", "log_file", str, "", "write records to files in this directory (absolute)"),
    Flag(
        "--export-type", "export_type", str, DEFAULT_MONITOR_EXPORT, "with --log-file: DB (SQLite) or Jsonl"
    ),
    Flag("--json-rotate-log-lines", "jsonl_rotate_log_lines", str, "", "Jsonl lines per file, 100..500000"),
    Flag("--json-rotate-log-files", "jsonl_rotate_log_files", str, "", "Jsonl files kept (-1: all)"),
    Flag("--top-n", "top_n", int, DEFAULT_TOP_N, "names reported per kind and device, by total time"),
    *TARGETING,
    Flag("--watch", None, bool, False, "live table of the reports per host/rank/kind; Ctrl-C leaves"),
    Flag("--status", None, bool, False, "which processes monitor now"),
)


def run(target: Target, args: Namespace) -> None:
    """Always-on monitoring of kernel / API / communication / marker durations in running processes.

    Example: dyno npu-monitor --npu-monitor-start --report-interval-s 10 --mspti-activity-kind Kernel,API
    """
    from dynoproto import dynolog_pb2 as pb
    from dynoproto import validate

    from .. import requests
    from ..connection import connect

    request = fill(pb.NpuMonitorRequest(), FLAGS, args)
    if args.status:
        return _status(target, request.targets)
    if args.watch and not (request.start or request.stop):
        return _watch(target, request.targets)
    request.log_file = requests.absolute_log_file(target, request.log_file)
    requests.check(validate.npu_monitor(request))
    with connect(target) as stub:
        response = stub.NpuMonitor(request, timeout=target.timeout)
    requests.report_command(target, response)
    if args.watch:
        _watch(target, request.targets)


def _status(target: Target, targets: pb.Targets) -> None:
    from dynoproto import dynolog_pb2 as pb

    from ..connection import connect

    with connect(target) as stub:
        processes = stub.ListProcesses(pb.ListProcessesRequest(job_id=targets.job_id), timeout=target.timeout)
    rows = [p for p in processes.processes if not targets.ranks or p.rank in targets.ranks]
    if target.json:
        print_json([as_dict(p) for p in rows])
        return
    state = {pb.MONITOR_STATE_RUNNING: "running", pb.MONITOR_STATE_IDLE: "idle"}
    print(
        table(
            ("PID", "RANK", "JOB", "MONITOR"),
            [
                [str(p.pid), rank_text(p.rank), str(p.job_id), state.get(p.monitor_state, "uninitialized")]
                for p in rows
            ],
        )
    )


def _watch(target: Target, targets: pb.Targets) -> None:
    """Stream reports; redraw one table of the latest report of each process as each arrives."""
    from dynoproto import dynolog_pb2 as pb

    from ..connection import connect

    latest: Dict[Tuple[str, int], pb.MetricsReport] = {}
    interactive = sys.stdout.isatty() and not target.json
    with connect(target) as stub:
        try:
            for report in stub.WatchMetrics(pb.WatchMetricsRequest(targets=targets, latest=True)):
                if target.json:  # one document per line (JSON Lines): a stream for machines
                    print_json(as_dict(report), indent=None)
                    continue
                latest[(report.hostname, report.pid)] = report
                if interactive:
                    sys.stdout.write(CLEAR)
                print(render(list(latest.values())), flush=True)
        except KeyboardInterrupt:
            return


def render(reports: List[pb.MetricsReport]) -> str:
    """Per host/rank/kind/device totals, then the top names of each, as one table."""
    rows: List[List[str]] = []
    for r in sorted(reports, key=lambda r: (r.hostname, r.rank, r.pid)):
        for k in r.kinds:
            device = "host" if k.device < 0 else str(k.device)
            who = f"{r.hostname}/{rank_text(r.rank)}"
            rows.append(
                [who, k.kind, device, str(k.count), _ms(k.total_ns), _ms(int(k.mean_ns)), _ms(k.max_ns), ""]
            )
            rows += [
                ["", "", "", str(n.count), _ms(n.total_ns), _ms(int(n.mean_ns)), "", n.name]
                for n in k.top[:5]
            ]
    stamp = time.strftime("%H:%M:%S")
    header = f"npu-monitor — {len(reports)} process(es), last update {stamp} (Ctrl-C leaves)"
    cols = ("HOST/RANK", "KIND", "DEVICE", "COUNT", "TOTAL ms", "MEAN ms", "MAX ms", "TOP NAMES")
    return header + "\n" + table(cols, rows)


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"


COMMAND = Command("npu-monitor", run, FLAGS)
