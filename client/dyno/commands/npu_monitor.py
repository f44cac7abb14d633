"""``dyno npu-monitor``: start, change or stop always-on monitoring; watch it live; see who runs it."""

from __future__ import annotations

import json
import sys
import time
from typing import Dict, List, Optional, Tuple

import typer

from dynoproto import dynolog_pb2 as pb
from dynoproto import validate

from ..connection import Target, connect
from ..output import as_dict, print_json, table
from . import tracing

CLEAR = "\033[H\033[2J"


def run(
    ctx: typer.Context,
    npu_monitor_start: bool = typer.Option(False, "--npu-monitor-start", help="start monitoring"),
    npu_monitor_stop: bool = typer.Option(
        False, "--npu-monitor-stop", help="stop monitoring (flush and tear down)"
    ),
    report_interval_s: int = typer.Option(
        60, "--report-interval-s", min=0, help="seconds per report (0: unchanged)"
    ),
    duration: float = typer.Option(
        0.0, "--duration", help="stop by itself after this many seconds (0: never)"
    ),
    mspti_activity_kind: str = typer.Option(
        "Marker",
        "--mspti-activity-kind",
        help="comma-separated: Marker, Kernel, API, Hccl, Memory, MemSet, MemCpy, Communication, AclAPI, "
        "NodeAPI, RuntimeAPI",
    ),
    filter_: str = typer.Option(
        "", "--filter", help="keep only names containing…: 'Kernel:matmul,conv;API:acl'"
    ),
    log_file: str = typer.Option(
        "", "--log-file", help="write records to files in this directory (absolute)"
    ),
    export_type: str = typer.Option("DB", "--export-type", help="with --log-file: DB (SQLite) or Jsonl"),
    json_rotate_log_lines: str = typer.Option(
        "", "--json-rotate-log-lines", help="Jsonl lines per file, 100..500000"
    ),
    json_rotate_log_files: str = typer.Option(
        "", "--json-rotate-log-files", help="Jsonl files kept (-1: all)"
    ),
    top_n: int = typer.Option(10, "--top-n", help="names reported per kind and device, by total time"),
    job_id: int = tracing.JOB_ID,
    pids: str = tracing.PIDS,
    rank_list: Optional[str] = tracing.RANK_LIST,
    process_limit: int = tracing.PROCESS_LIMIT,
    watch: bool = typer.Option(
        False, "--watch", help="live table of the reports per host/rank/kind; Ctrl-C leaves"
    ),
    status: bool = typer.Option(False, "--status", help="which processes monitor now"),
) -> None:
    """Always-on monitoring of kernel / API / communication / marker durations in running processes.

    Example: dyno npu-monitor --npu-monitor-start --report-interval-s 10 --mspti-activity-kind Kernel,API
    """
    target: Target = ctx.obj
    targets = tracing.targets(job_id, pids, rank_list, process_limit)
    if status:
        return _status(target, targets)
    if watch and not (npu_monitor_start or npu_monitor_stop):
        return _watch(target, targets)
    request = pb.NpuMonitorRequest(
        targets=targets,
        start=npu_monitor_start,
        stop=npu_monitor_stop,
        report_interval_s=report_interval_s,
        duration_s=duration,
        activity_kinds=[k.strip() for k in mspti_activity_kind.split(",") if k.strip()],
        log_file=tracing.absolute_log_file(target, log_file) if log_file else "",
        export_type=export_type,
        jsonl_rotate_log_lines=json_rotate_log_lines,
        jsonl_rotate_log_files=json_rotate_log_files,
        filter=filter_,
        top_n=top_n,
    )
    tracing.check(validate.npu_monitor(request))
    with connect(target) as stub:
        response = stub.NpuMonitor(request, timeout=target.timeout)
    tracing.report_command(target, response)
    if watch:
        _watch(target, targets)


def _status(target: Target, targets: pb.Targets) -> None:
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
                [
                    str(p.pid),
                    tracing.rank_text(p.rank),
                    str(p.job_id),
                    state.get(p.monitor_state, "uninitialized"),
                ]
                for p in rows
            ],
        )
    )


def _watch(target: Target, targets: pb.Targets) -> None:
    """Stream reports; redraw one table of the latest report of each process as each arrives."""
    latest: Dict[Tuple[str, int], pb.MetricsReport] = {}
    interactive = sys.stdout.isatty() and not target.json
    with connect(target) as stub:
        try:
            for report in stub.WatchMetrics(pb.WatchMetricsRequest(targets=targets, latest=True)):
                if target.json:  # one document per line (JSON Lines): a stream for machines
                    print(json.dumps(as_dict(report)), flush=True)
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
            who = f"{r.hostname}/{tracing.rank_text(r.rank)}"
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
