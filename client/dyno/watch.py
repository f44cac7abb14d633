"""``dyno npu-monitor --watch``: one live table of the latest report of each monitored process, on one
host or merged from many (a host whose stream ended is marked until its reports come again); with
``--json``, JSON Lines."""

from __future__ import annotations

import sys
import time
from types import MappingProxyType
from typing import Any, Dict, Iterator, List, Mapping, Sequence, Tuple

from msmonitor_contract.targets import Targets

from .edge.rpc import Daemon
from .fleet import fanout
from .fleet.target import Target
from .model.monitoring import MetricsReport
from .output import as_dict, control, print_json, rank_text, table

CLEAR = "\033[H\033[2J"


def one(target: Target, targets: Targets) -> None:
    """Stream reports; redraw one table of the latest report of each process as each arrives."""
    latest: Dict[Tuple[str, int], MetricsReport] = {}
    interactive = sys.stdout.isatty() and not target.json
    with Daemon(target, "npu-monitor --watch").watch_metrics(targets) as stream:
        for report in stream:
            if target.json:  # one document per line (JSON Lines): a stream for machines
                print_json(as_dict(report), indent=None)
                continue
            latest[(report.hostname, report.pid)] = report
            if interactive:
                control(CLEAR)
            print(render([(r.hostname, r) for r in latest.values()]), flush=True)


def across(target: Target, fleet: Sequence[Target], targets: Targets) -> None:
    """One live view merged from every host's stream, each process named by the host as given (several
    daemons may share a machine name). JSON Lines: each report with its ``host``, and a line per
    drop-out."""

    def reports(host: Target) -> Iterator[MetricsReport]:
        with Daemon(host, "npu-monitor --watch").watch_metrics(targets) as stream:
            yield from stream

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
        self.latest: Dict[Tuple[str, int], MetricsReport] = {}
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
    reports: List[Tuple[str, MetricsReport]],
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
    for host, r in sorted(reports, key=lambda hr: (hr[0], hr[1].rank, hr[1].pid)):
        share = sampled_share(r)
        who = f"{host}/{rank_text(r.rank)}" + (" [dropped]" if host in gone else "")
        if share:
            notes.append(_sampling_note(who, r, share))
            who += "*"
        rows += _report_rows(who, r, share if estimating else None)
    stamp = time.strftime("%H:%M:%S")
    header = f"npu-monitor — {len(reports)} process(es){scope}, last update {stamp} (Ctrl-C leaves)"
    cols = ["HOST/RANK", "KIND", "DEVICE", *(("COUNT", "EST. COUNT") if estimating else ("COUNT",))]
    cols += ["TOTAL ms", "MEAN ms", "MAX ms", "TOP NAMES"]
    return "\n".join([header, table(cols, rows), *notes, *gone.values()])


def _report_rows(who: str, r: MetricsReport, share: Any) -> List[List[str]]:
    """One report's rows: each kind's totals, then its top five names. *share*: the part sampled (0: all
    of it) when the table estimates counts, None when it has no EST. COUNT column."""

    def counts(count: int) -> List[str]:
        if share is None:
            return [str(count)]
        return [str(count), f"~{count / share:.0f}" if share else ""]

    rows: List[List[str]] = []
    for k in r.kinds:
        device = "host" if k.device < 0 else str(k.device)
        times = [_ms(k.total_ns), _ms(int(k.mean_ns)), _ms(k.max_ns)]
        rows.append([who, k.kind, device, *counts(k.count), *times, ""])
        rows += [
            ["", "", "", *counts(n.count), _ms(n.total_ns), _ms(int(n.mean_ns)), "", n.name]
            for n in k.top[:5]
        ]
    return rows


def sampled_share(report: MetricsReport) -> float:
    """The part of its interval a report observed when less than all of it (the torch backend's window),
    else 0."""
    from msmonitor_contract.report import sampled_fraction

    share = sampled_fraction(report.start_ns, report.end_ns, report.sampled_ns)
    return share if share < 1 else 0.0


def _sampling_note(who: str, report: MetricsReport, share: float) -> str:
    interval_s = (report.end_ns - report.start_ns) / 1e9
    sampled_s = report.sampled_ns / 1e9
    return (
        f"* {who}: {report.backend} backend sampled {sampled_s:.2f} s of the {interval_s:.1f} s "
        f"interval ({share:.0%}): COUNT and TOTAL are of that window; EST. COUNT is COUNT scaled to the "
        "interval, an estimate that assumes the window is typical"
    )


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"
