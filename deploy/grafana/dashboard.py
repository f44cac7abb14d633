"""The Grafana dashboard of the npu-monitor metrics that dynolog exports (--prometheus-port), built with
grafanalib.

    python deploy/grafana/dashboard.py          # rewrites msmonitor-dashboard.json beside this file
    python deploy/grafana/dashboard.py --check  # exit 1 when the committed JSON is out of date

The queries expect the scrape configs in deploy/ (honor_labels: the series' own "job" is the training
job's id). Durations are seconds; "busy" is record time per second of wall time, so 8 devices busy all
the time read 800 %. The per-interval series (msmonitor_interval_*, msmonitor_top_*) hold the last
report of each process, so the top-name panels show the latest report, not a sum over the time range.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Sequence

from grafanalib._gen import DashboardEncoder
from grafanalib.core import (
    Dashboard,
    GridPos,
    RowPanel,
    Stat,
    Table,
    TableSortByField,
    Target,
    Template,
    Templating,
    Time,
    TimeSeries,
)

OUTPUT = Path(__file__).resolve().with_name("msmonitor-dashboard.json")
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Every query narrows to the chosen hosts, jobs and ranks; "All" is the regex .*.
WHO = 'host=~"$host", job=~"$job", rank=~"$rank"'
TOP_N = 10
# One colour, no alert level: grafanalib leaves a Stat's steps an empty string otherwise.
BASE_THRESHOLD = [{"color": "green", "value": None}]


def _variable(name: str, label: str, query: str) -> Template:
    return Template(
        name=name,
        label=label,
        query=query,
        dataSource=DATASOURCE,
        includeAll=True,
        multi=True,
        allValue=".*",
        default="All",
        refresh=2,  # on each change of the time range: jobs come and go
        sort=1,
    )


def _targets(*exprs: str, legend: str = "", instant: bool = False, table: bool = False) -> List[Target]:
    return [
        Target(
            expr=expr,
            legendFormat=legend,
            refId=chr(ord("A") + i),
            instant=instant,
            format="table" if table else "time_series",
            datasource=DATASOURCE,
        )
        for i, expr in enumerate(exprs)
    ]


def _row(title: str, y: int) -> RowPanel:
    return RowPanel(title=title, gridPos=GridPos(h=1, w=24, x=0, y=y))


def _busy(by: str, kind: str) -> str:
    return f"sum by ({by}) (rate(msmonitor_duration_seconds_total{{{WHO}, kind=~{kind}}}[$__rate_interval]))"


def panels() -> Sequence[object]:
    kernel_busy_per_rank = (
        f'sum by (job, rank) (rate(msmonitor_duration_seconds_total{{{WHO}, kind="Kernel"}}'
        "[$__rate_interval]))"
    )
    return [
        _row("Overview", 0),
        Stat(
            title="Processes reporting",
            description="Processes whose last npu-monitor report the daemons hold.",
            dataSource=DATASOURCE,
            targets=_targets(f"count(msmonitor_report_timestamp_seconds{{{WHO}}})", instant=True),
            gridPos=GridPos(h=5, w=4, x=0, y=1),
            reduceCalc="lastNotNull",
            thresholds=BASE_THRESHOLD,
        ),
        Stat(
            title="Oldest last report",
            description="Age of the least recent report: a process that stopped reporting stands out.",
            dataSource=DATASOURCE,
            targets=_targets(f"time() - min(msmonitor_report_timestamp_seconds{{{WHO}}})", instant=True),
            gridPos=GridPos(h=5, w=4, x=4, y=1),
            format="s",
            reduceCalc="lastNotNull",
            thresholds=BASE_THRESHOLD,
        ),
        TimeSeries(
            title="Records lost in the processes, by reason",
            dataSource=DATASOURCE,
            targets=_targets(
                f"sum by (host, reason) (increase(msmonitor_dropped_total{{{WHO}}}[$__rate_interval]))",
                legend="{{host}} {{reason}}",
            ),
            gridPos=GridPos(h=5, w=8, x=8, y=1),
            unit="short",
        ),
        TimeSeries(
            title="Dropped by the daemons, by where",
            dataSource=DATASOURCE,
            targets=_targets(
                "sum by (instance, where) (increase(dynolog_dropped_total[$__rate_interval]))",
                legend="{{instance}} {{where}}",
            ),
            gridPos=GridPos(h=5, w=8, x=16, y=1),
            unit="short",
        ),
        _row("By kind", 6),
        TimeSeries(
            title="Busy time, by kind",
            description="Record time per second of wall time, summed over the chosen processes.",
            dataSource=DATASOURCE,
            targets=_targets(_busy("kind", '"$kind"'), legend="{{kind}}"),
            gridPos=GridPos(h=8, w=12, x=0, y=7),
            unit="percentunit",
        ),
        TimeSeries(
            title="Records per second, by kind",
            dataSource=DATASOURCE,
            targets=_targets(
                f'sum by (kind) (rate(msmonitor_records_total{{{WHO}, kind=~"$kind"}}[$__rate_interval]))',
                legend="{{kind}}",
            ),
            gridPos=GridPos(h=8, w=12, x=12, y=7),
            unit="short",
        ),
        TimeSeries(
            title="Mean duration, by kind",
            dataSource=DATASOURCE,
            targets=_targets(
                _busy("kind", '"$kind"')
                + " / "
                + f'sum by (kind) (rate(msmonitor_records_total{{{WHO}, kind=~"$kind"}}[$__rate_interval]))',
                legend="{{kind}}",
            ),
            gridPos=GridPos(h=8, w=12, x=0, y=15),
            unit="s",
        ),
        TimeSeries(
            title="Longest record of the last interval, by kind",
            dataSource=DATASOURCE,
            targets=_targets(
                f'max by (kind) (msmonitor_interval_max_seconds{{{WHO}, kind=~"$kind"}})', legend="{{kind}}"
            ),
            gridPos=GridPos(h=8, w=12, x=12, y=15),
            unit="s",
        ),
        _row("By rank", 23),
        TimeSeries(
            title="Busy time per rank",
            description="Record time per second of wall time, of the chosen kinds.",
            dataSource=DATASOURCE,
            targets=_targets(
                _busy("job, host, rank", '"$kind"'), legend="job {{job}} {{host}} rank {{rank}}"
            ),
            gridPos=GridPos(h=8, w=12, x=0, y=24),
            unit="percentunit",
        ),
        Stat(
            title="Slowest ranks: kernel time of the last interval",
            description="The rank with the most kernel time holds the others up at every collective.",
            dataSource=DATASOURCE,
            targets=_targets(
                "topk(5, sum by (job, host, rank) "
                f'(msmonitor_interval_duration_seconds{{{WHO}, kind="Kernel"}}))',
                legend="job {{job}} {{host}} rank {{rank}}",
                instant=True,
            ),
            gridPos=GridPos(h=8, w=12, x=12, y=24),
            format="s",
            graphMode="none",
            orientation="horizontal",
            textMode="value_and_name",
            reduceCalc="lastNotNull",
            thresholds=BASE_THRESHOLD,
        ),
        TimeSeries(
            title="Rank skew: slowest over mean kernel time, per job",
            description="1 is balanced; 1.5: the slowest rank spends half as long again as the mean.",
            dataSource=DATASOURCE,
            targets=_targets(
                f"max by (job) ({kernel_busy_per_rank}) / avg by (job) ({kernel_busy_per_rank})",
                legend="job {{job}}",
            ),
            gridPos=GridPos(h=8, w=12, x=0, y=32),
            unit="short",
        ),
        TimeSeries(
            title="Communication time per rank",
            description="The fastest ranks wait longest in collectives for the slowest.",
            dataSource=DATASOURCE,
            targets=_targets(
                _busy("job, host, rank", '"Communication"'), legend="job {{job}} {{host}} rank {{rank}}"
            ),
            gridPos=GridPos(h=8, w=12, x=12, y=32),
            unit="percentunit",
        ),
        _row("Top names", 40),
        Table(
            title=f"Top {TOP_N} kernels by total duration (last interval, chosen ranks)",
            dataSource=DATASOURCE,
            targets=_targets(
                f'topk({TOP_N}, sum by (name) (msmonitor_top_duration_seconds{{{WHO}, kind="Kernel"}}))',
                instant=True,
                table=True,
            ),
            gridPos=GridPos(h=9, w=12, x=0, y=41),
            unit="s",
            sortBy=[TableSortByField(displayName="Value", desc=True)],
        ),
        TimeSeries(
            title=f"Top {TOP_N} kernels by total duration, over time",
            dataSource=DATASOURCE,
            targets=_targets(
                f'topk({TOP_N}, sum by (name) (msmonitor_top_duration_seconds{{{WHO}, kind="Kernel"}}))',
                legend="{{name}}",
            ),
            gridPos=GridPos(h=9, w=12, x=12, y=41),
            unit="s",
        ),
        Table(
            title=f"Top {TOP_N} names of each kind by total duration (last interval)",
            dataSource=DATASOURCE,
            targets=_targets(
                f"topk by (kind) ({TOP_N}, sum by (kind, name) "
                f'(msmonitor_top_duration_seconds{{{WHO}, kind=~"$kind"}}))',
                instant=True,
                table=True,
            ),
            gridPos=GridPos(h=9, w=12, x=0, y=50),
            unit="s",
            sortBy=[TableSortByField(displayName="Value", desc=True)],
        ),
        Table(
            title=f"Top {TOP_N} kernels by count (last interval)",
            dataSource=DATASOURCE,
            targets=_targets(
                f'topk({TOP_N}, sum by (name) (msmonitor_top_records{{{WHO}, kind="Kernel"}}))',
                instant=True,
                table=True,
            ),
            gridPos=GridPos(h=9, w=12, x=12, y=50),
            unit="short",
            sortBy=[TableSortByField(displayName="Value", desc=True)],
        ),
        TimeSeries(
            title="Mean kernel duration of the last interval, per rank",
            dataSource=DATASOURCE,
            targets=_targets(
                f'avg by (job, host, rank) (msmonitor_interval_mean_seconds{{{WHO}, kind="Kernel"}})',
                legend="job {{job}} {{host}} rank {{rank}}",
            ),
            gridPos=GridPos(h=8, w=24, x=0, y=59),
            unit="s",
        ),
        TimeSeries(
            title="Part of each interval observed, per rank",
            description="1 where every record is seen (MSPTI); below 1 where the torch backend samples "
            "a window of the interval: counts and totals above are of that window.",
            dataSource=DATASOURCE,
            targets=_targets(
                f"min by (job, host, rank) (msmonitor_interval_sampled_ratio{{{WHO}}})",
                legend="job {{job}} {{host}} rank {{rank}}",
            ),
            gridPos=GridPos(h=6, w=24, x=0, y=67),
            unit="percentunit",
        ),
    ]


def dashboard() -> Dashboard:
    who = "msmonitor_report_timestamp_seconds"
    return Dashboard(
        title="msMonitor: npu-monitor",
        uid="msmonitor-npu-monitor",
        description="Kernel, API, communication and marker durations that dyno npu-monitor collects.",
        tags=["msmonitor", "npu-monitor"],
        refresh="30s",
        time=Time("now-1h", "now"),
        timezone="browser",
        templating=Templating(
            [
                Template(name="datasource", label="Data source", query="prometheus", type="datasource"),
                _variable("host", "Host", f"label_values({who}, host)"),
                _variable("job", "Job", f'label_values({who}{{host=~"$host"}}, job)'),
                _variable("rank", "Rank", f'label_values({who}{{host=~"$host", job=~"$job"}}, rank)'),
                _variable(
                    "kind",
                    "Kind",
                    'label_values(msmonitor_interval_records{host=~"$host", job=~"$job"}, kind)',
                ),
            ]
        ),
        panels=list(panels()),
    ).auto_panel_ids()


def render() -> str:
    data = dashboard().to_json_data()
    return json.dumps(data, cls=DashboardEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT} is out of date: run python {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
