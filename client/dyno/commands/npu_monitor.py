"""``dyno npu-monitor``: start, change or stop always-on monitoring; watch it live; see who runs it."""

from __future__ import annotations

import sys
import time
from argparse import ArgumentTypeError, Namespace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Sequence, Tuple

from msmonitor_contract.vocabulary import (
    DEFAULT_MONITOR_EXPORT,
    DEFAULT_MONITOR_KINDS,
    DEFAULT_REPORT_INTERVAL_S,
    DEFAULT_TOP_N,
    split_list,
)

from ..cli import TARGETING, Command, Flag, check_fields, directory, field_flag, fill
from ..exits import EXIT_USAGE, CliError
from ..fleet.target import Target, absolute_path
from ..output import as_dict, control, print_json, rank_text, table

if TYPE_CHECKING:
    from dynoproto import dynolog_pb2 as pb

    from ..fleet import fanout

CLEAR = "\033[H\033[2J"


class AutoTrace(NamedTuple):
    """``--auto-trace``'s keys, as the AutoTrace message holds them; each default is a key left out."""

    slowdown: float = 0.25
    for_intervals: int = 3
    iterations: int = 2
    cooldown_s: int = 30 * 60
    max_per_day: int = 3


_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _percent(text: str) -> float:
    return float(text.removesuffix("%")) / 100


def _seconds(text: str) -> int:
    unit = text[-1:] if text[-1:] in _UNITS_S else "s"
    return int(float(text.removesuffix(unit)) * _UNITS_S[unit])


def _per_day(text: str) -> int:
    return int(text.removesuffix("/day"))


# key -> (the AutoTrace field, how its text reads)
_AUTO_TRACE_KEYS: Dict[str, Tuple[str, Callable[[str], Any]]] = {
    "slowdown": ("slowdown", _percent),
    "for": ("for_intervals", int),
    "iterations": ("iterations", int),
    "cooldown": ("cooldown_s", _seconds),
    "max": ("max_per_day", _per_day),
}


def auto_trace(text: str) -> AutoTrace:
    """``slowdown=25%,for=3,iterations=2,cooldown=30m,max=3/day`` (any of the keys; ``on``: the defaults)."""
    values: Dict[str, Any] = {}
    for item in split_list("" if text == "on" else text):
        key, _, value = item.partition("=")
        if key not in _AUTO_TRACE_KEYS:
            raise ArgumentTypeError(f"unknown key {key!r} in {text!r} (keys: {', '.join(_AUTO_TRACE_KEYS)})")
        field, parse = _AUTO_TRACE_KEYS[key]
        try:
            values[field] = parse(value.strip())
        except ValueError:
            raise ArgumentTypeError(f"{key}={value!r} does not read as {_EXAMPLES[key]}") from None
    return AutoTrace(**values)


_EXAMPLES = {"slowdown": "25%", "for": "3", "iterations": "2", "cooldown": "30m (s, m, h, d)", "max": "3/day"}

FLAGS = (
    field_flag("start", bool, False, "start monitoring"),
    field_flag("stop", bool, False, "stop monitoring (flush and tear down)"),
    Flag(
        "--report-interval-s",
        "report_interval_s",
        int,
        DEFAULT_REPORT_INTERVAL_S,
        "seconds per report (0: unchanged)",
        minimum=0,
    ),
    field_flag("duration_s", float, 0.0, "stop by itself after this many seconds (0: never)"),
    field_flag(
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
    field_flag("jsonl_rotate_log_lines", str, "", "Jsonl lines per file, 100..500000"),
    field_flag("jsonl_rotate_log_files", str, "", "Jsonl files kept (-1: all)"),
    Flag("--top-n", "top_n", int, DEFAULT_TOP_N, "names reported per kind and device, by total time"),
    Flag(
        "--auto-trace",
        None,
        auto_trace,
        None,
        "with --npu-monitor-start: when a name gets slower than its baseline (or than the other ranks) by "
        "slowdown for `for` intervals, trace `iterations` steps of that process and resume monitoring; "
        "at most one trace per cooldown per process, max per day per job. Defaults: "
        "'slowdown=25%,for=3,iterations=2,cooldown=30m,max=3/day' ('on': all of them); see dyno incidents",
    ),
    *TARGETING,
    Flag("--watch", None, bool, False, "live table of the reports per host/rank/kind; Ctrl-C leaves"),
    Flag("--status", None, bool, False, "which processes monitor now"),
    Flag(
        "--collect",
        None,
        directory,
        None,
        "fetch the files the monitors wrote with --log-file from every host into DIR here (alone, or after "
        "--npu-monitor-stop: a monitor still writing is not fetched), as msprof-analyze cluster -d DIR "
        "reads a job: DIR/<host>/msmonitor_<pid>_<time>_<rank>.db; never overwrites",
    ),
    Flag("--collect-timeout", None, float, 600.0, "seconds --collect's fetch from one host takes at most"),
)


def run(target: Target, args: Namespace) -> None:
    """Always-on monitoring of kernel / API / communication / marker durations in running processes.

    Example: dyno npu-monitor --npu-monitor-start --report-interval-s 10 --mspti-activity-kind Kernel,API
    On many hosts, one live table of every host's processes: dyno --hosts 'node[001-016]' npu-monitor --watch
    A job's files, for msprof-analyze: dyno --hosts 'node[01-16]' npu-monitor --npu-monitor-stop --collect ./m
    """
    from msmonitor_contract.kinds import NPUMONITOR

    from ..answers import report_command

    request = _request(args)
    if args.status:
        return _status(target, request.targets)
    if args.watch and not (request.start or request.stop):
        return _watch(target, request.targets)
    if args.collect and not request.stop:
        return _raise(_collect([target], request.targets, args, target.json))
    request.log_file = absolute_path(target, request.log_file)
    check_fields(NPUMONITOR.check(request))
    report_command(target, _send(target, request, args))
    if args.collect:
        _raise(_collect([target], request.targets, args, target.json))
    if args.watch:
        _watch(target, request.targets)


def across(target: Target, args: Namespace) -> None:
    """As ``run``, on every host: one table of the answers, one live view of every host's reports."""
    from msmonitor_contract.kinds import NPUMONITOR

    from ..answers import COMMAND_VIEW, judge_command
    from ..fleet import fanout

    request = _request(args)
    if args.status:
        view = fanout.View(_STATUS_HEADERS, _status_rows, _status_json)
        return fanout.run(target, lambda one: _monitors(one, request.targets), view)
    if args.watch and not (request.start or request.stop):
        return _watch_across(target, fanout.fleet(target), request.targets)
    if args.collect and not request.stop:
        return _raise(_collect(fanout.fleet(target), request.targets, args, target.json))
    check_fields(NPUMONITOR.check(request))  # the path as given: other hosts have other cwds
    fleet = fanout.fleet(target)
    outcomes = fanout.gather(fleet, lambda one: _send(one, request, args), target.parallel, judge_command)
    fanout.show(target, outcomes, COMMAND_VIEW)
    effective = [one for one, o in zip(fleet, outcomes) if o.state == fanout.EFFECTIVE]
    missing = _collect(effective, request.targets, args, target.json) if args.collect else ""
    if args.watch:
        _watch_across(target, effective, request.targets)
    fanout.verdict(outcomes)
    _raise(missing)


def _request(args: Namespace) -> pb.NpuMonitorRequest:
    from dynoproto import dynolog_pb2 as pb

    request = fill(pb.NpuMonitorRequest(), FLAGS, args)
    if args.collect and (request.start or args.watch or args.status):
        raise CliError(
            "--collect fetches what stopped monitors wrote: give it alone or with --npu-monitor-stop",
            EXIT_USAGE,
        )
    if args.auto_trace is not None:
        request.auto_trace.CopyFrom(pb.AutoTrace(**args.auto_trace._asdict()))
    return request


def _collect(fleet: Sequence[Target], targets: pb.Targets, args: Namespace, quiet: bool) -> str:
    """The monitors' files of *targets* from every host of *fleet* into --collect's DIR; why some are
    missing, "" when none is."""
    from ..tracing import collect

    return collect.monitors(fleet, targets, args.collect, args.collect_timeout, quiet)


def _raise(missing: str) -> None:
    if missing:
        raise CliError(missing)


def _send(target: Target, request: pb.NpuMonitorRequest, args: Namespace) -> pb.CommandResponse:
    from ..edge import legacy_commands
    from ..edge.connection import connect
    from ..edge.legacy import LegacyDaemon

    try:
        with connect(target, "dyno npu-monitor") as stub:
            return stub.NpuMonitor(request, timeout=target.timeout)
    except LegacyDaemon as old:  # msMonitor's C++ daemon: its own request
        return legacy_commands.npu_monitor(old.host, request, args)


_STATUS_HEADERS = ("PID", "RANK", "JOB", "MONITOR")


def _status(target: Target, targets: pb.Targets) -> None:
    processes = _monitors(target, targets)
    if target.json:
        print_json(_status_json(processes))
    else:
        print(table(_STATUS_HEADERS, _status_rows(processes)))


def _monitors(target: Target, targets: pb.Targets) -> List[pb.ProcessInfo]:
    """The processes *targets* names (job, ranks), with their monitor state."""
    from dynoproto import dynolog_pb2 as pb

    from ..edge.connection import connect

    with connect(target, "npu-monitor --status") as stub:
        processes = stub.ListProcesses(pb.ListProcessesRequest(job_id=targets.job_id), timeout=target.timeout)
    return [p for p in processes.processes if not targets.ranks or p.rank in targets.ranks]


def _status_rows(processes: List[pb.ProcessInfo]) -> List[List[str]]:
    from dynoproto import dynolog_pb2 as pb

    state = {pb.MONITOR_STATE_RUNNING: "running", pb.MONITOR_STATE_IDLE: "idle"}
    return [
        [str(p.pid), rank_text(p.rank), str(p.job_id), state.get(p.monitor_state, "uninitialized")]
        for p in processes
    ]


def _status_json(processes: List[pb.ProcessInfo]) -> List[Dict[str, Any]]:
    return [as_dict(p) for p in processes]


def _watch(target: Target, targets: pb.Targets) -> None:
    """Stream reports; redraw one table of the latest report of each process as each arrives."""
    import grpc

    from dynoproto import dynolog_pb2 as pb

    from ..edge.connection import connect
    from ..interrupt import cancelled_on_interrupt

    latest: Dict[Tuple[str, int], pb.MetricsReport] = {}
    interactive = sys.stdout.isatty() and not target.json
    with connect(target, "npu-monitor --watch") as stub:
        stream = stub.WatchMetrics(pb.WatchMetricsRequest(targets=targets, latest=True))
        with cancelled_on_interrupt(stream) as stopped:
            try:
                for report in stream:
                    if target.json:  # one document per line (JSON Lines): a stream for machines
                        print_json(as_dict(report), indent=None)
                        continue
                    latest[(report.hostname, report.pid)] = report
                    if interactive:
                        control(CLEAR)
                    print(render([(r.hostname, r) for r in latest.values()]), flush=True)
            except grpc.RpcError as error:
                if not stopped(error):
                    raise


def _watch_across(target: Target, fleet: Sequence[Target], targets: pb.Targets) -> None:
    """One live view merged from every host's stream: the latest report of each process of each host,
    named by the host as given (several daemons may share a machine name); a host whose stream ended
    is marked, with when and why, until its stream is open again and reports come. JSON Lines: each
    report with its ``host``, and a line per drop-out."""
    from dynoproto import dynolog_pb2 as pb

    from ..edge.connection import connect
    from ..fleet import fanout

    def reports(one: Target) -> Iterator[pb.MetricsReport]:
        with connect(one, "npu-monitor --watch") as stub:
            yield from stub.WatchMetrics(pb.WatchMetricsRequest(targets=targets, latest=True))

    board = _Board(len(fleet))
    interactive = sys.stdout.isatty() and not target.json
    try:
        for batch in fanout.stream(fleet, reports):
            for event in batch:
                if target.json:  # JSON Lines, as on one host, each line with its host
                    print_json(_event_json(event), indent=None)
                else:
                    board.take(event)
            if not target.json:
                if interactive:
                    control(CLEAR)
                print(board.text(), flush=True)
    except KeyboardInterrupt:
        return


class _Board:
    """What the merged watch shows: each process's latest report, and the hosts dropped out (until their
    reports come again)."""

    def __init__(self, hosts: int) -> None:
        self.hosts = hosts
        self.latest: Dict[Tuple[str, int], pb.MetricsReport] = {}
        self.gone: Dict[str, str] = {}  # host -> when and why it dropped out
        self._since: Dict[str, str] = {}  # host -> when it dropped out (its retries do not move it)

    def take(self, event: fanout.Event) -> None:
        if event.item is not None:
            self.latest[(event.host, event.item.pid)] = event.item
            self.gone.pop(event.host, None)
            self._since.pop(event.host, None)
            return
        state = f"unreachable ({event.reason})" if event.reason else "ended"
        stamp = self._since.setdefault(event.host, time.strftime("%H:%M:%S"))
        self.gone[event.host] = (
            f"{event.host}: dropped out at {stamp}, {state}: {event.why}; "
            f"trying again in {event.retry_s:.0f} s"
        )

    def text(self) -> str:
        reports = [(host, report) for (host, _), report in self.latest.items()]
        return render(reports, f" on {self.hosts - len(self.gone)} of {self.hosts} host(s)", self.gone)


def _event_json(event: fanout.Event) -> Dict[str, Any]:
    if event.item is not None:
        return {"host": event.host, **as_dict(event.item)}
    return {"host": event.host, "dropped": event.why, "reason": event.reason, "retry_s": event.retry_s}


def render(
    reports: List[Tuple[str, pb.MetricsReport]],
    scope: str = "",
    gone: Mapping[str, str] = MappingProxyType({}),
) -> str:
    """Per host/rank/kind/device totals, then the top names of each, as one table; each report comes
    with the host name to show. Across hosts, *scope* says how many answer, and *gone* marks the hosts
    that dropped out (their last reports stay) and says why. A report that observed only part of its
    interval (the torch backend's sampling window) is marked ``*``, with a note of how much it sampled
    and an ``EST. COUNT`` column scaling its counts to the whole interval."""
    rows: List[List[str]] = []
    notes: List[str] = []
    estimating = any(sampled_share(r) for _, r in reports)  # else no EST. COUNT column: nothing to scale

    def counts(count: int, share: float) -> List[str]:
        return [str(count), f"~{count / share:.0f}" if share else ""] if estimating else [str(count)]

    for host, r in sorted(reports, key=lambda hr: (hr[0], hr[1].rank, hr[1].pid)):
        share = sampled_share(r)
        who = f"{host}/{rank_text(r.rank)}" + (" [dropped]" if host in gone else "")
        if share:
            notes.append(_sampling_note(who, r, share))
            who += "*"
        for k in r.kinds:
            device = "host" if k.device < 0 else str(k.device)
            times = [_ms(k.total_ns), _ms(int(k.mean_ns)), _ms(k.max_ns)]
            rows.append([who, k.kind, device, *counts(k.count, share), *times, ""])
            rows += [
                ["", "", "", *counts(n.count, share), _ms(n.total_ns), _ms(int(n.mean_ns)), "", n.name]
                for n in k.top[:5]
            ]
    stamp = time.strftime("%H:%M:%S")
    header = f"npu-monitor — {len(reports)} process(es){scope}, last update {stamp} (Ctrl-C leaves)"
    cols = ["HOST/RANK", "KIND", "DEVICE", *(("COUNT", "EST. COUNT") if estimating else ("COUNT",))]
    cols += ["TOTAL ms", "MEAN ms", "MAX ms", "TOP NAMES"]
    return "\n".join([header, table(cols, rows), *notes, *gone.values()])


def sampled_share(report: pb.MetricsReport) -> float:
    """The part of its interval a report observed when less than all of it (the torch backend's window),
    else 0."""
    from msmonitor_contract.report import sampled_fraction  # watch only: the monitor package is big

    share = sampled_fraction(report.start_ns, report.end_ns, report.sampled_ns)
    return share if share < 1 else 0.0


def _sampling_note(who: str, report: pb.MetricsReport, share: float) -> str:
    interval_s = (report.end_ns - report.start_ns) / 1e9
    sampled_s = report.sampled_ns / 1e9
    return (
        f"* {who}: {report.backend} backend sampled {sampled_s:.2f} s of the {interval_s:.1f} s "
        f"interval ({share:.0%}): COUNT and TOTAL are of that window; EST. COUNT is COUNT scaled to the "
        "interval, an estimate that assumes the window is typical"
    )


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"


COMMAND = Command("npu-monitor", run, FLAGS, across)
