"""``dyno npu-monitor``: start, change or stop always-on monitoring; watch it live; see who runs it.
Its request's flags are the declaration's (:data:`msmonitor_contract.kinds.NPUMONITOR`), field by field;
the live table is :mod:`dyno.watch`."""

from __future__ import annotations

import dataclasses
from argparse import Namespace
from typing import Any, Dict, List, Sequence, Tuple

from msmonitor_contract.kinds import NPUMONITOR
from msmonitor_contract.targets import Targets

from ..declared import declared, request
from ..exits import EXIT_USAGE, CliError
from ..flags import Command, Flag, check_fields, directory
from ..fleet.target import Target, absolute_path
from ..model.commands import CommandResponse
from ..model.daemon import ProcessInfo
from ..output import as_dict, print_json, rank_text, table

FLAGS = (
    *declared(NPUMONITOR),
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
    from .. import watch
    from ..answers import report_command

    monitor = _request(args)
    if args.status:
        return _status(target, monitor.targets)
    if args.watch and not (monitor.start or monitor.stop):
        return watch.one(target, monitor.targets)
    if args.collect and not monitor.stop:
        return _raise(_collect([target], monitor.targets, args, target.json))
    monitor = dataclasses.replace(monitor, log_file=absolute_path(target, monitor.log_file))
    check_fields(NPUMONITOR.check(monitor))
    report_command(target, _send(target, monitor, args))
    if args.collect:
        _raise(_collect([target], monitor.targets, args, target.json))
    if args.watch:
        watch.one(target, monitor.targets)


def across(target: Target, args: Namespace) -> None:
    """As ``run``, on every host: one table of the answers, one live view of every host's reports."""
    from .. import watch
    from ..answers import COMMAND_VIEW, judge_command
    from ..fleet import fanout

    monitor = _request(args)
    if args.status:
        view = fanout.View(_STATUS_HEADERS, _status_rows, _status_json)
        return fanout.run(target, lambda one: _monitors(one, monitor.targets), view)
    if args.watch and not (monitor.start or monitor.stop):
        return watch.across(target, fanout.fleet(target), monitor.targets)
    if args.collect and not monitor.stop:
        return _raise(_collect(fanout.fleet(target), monitor.targets, args, target.json))
    check_fields(NPUMONITOR.check(monitor))  # the path as given: other hosts have other cwds
    fleet = fanout.fleet(target)
    outcomes = fanout.gather(fleet, lambda one: _send(one, monitor, args), target.parallel, judge_command)
    fanout.show(target, outcomes, COMMAND_VIEW)
    effective = [one for one, o in zip(fleet, outcomes) if o.state == fanout.EFFECTIVE]
    missing = _collect(effective, monitor.targets, args, target.json) if args.collect else ""
    if args.watch:
        watch.across(target, effective, monitor.targets)
    fanout.verdict(outcomes)
    _raise(missing)


def _request(args: Namespace) -> Any:
    monitor = request(NPUMONITOR, FLAGS, args)
    if args.collect and (monitor.start or args.watch or args.status):
        raise CliError(
            "--collect fetches what stopped monitors wrote: give it alone or with --npu-monitor-stop",
            EXIT_USAGE,
        )
    return monitor


def _collect(fleet: Sequence[Target], targets: Targets, args: Namespace, quiet: bool) -> str:
    """The monitors' files of *targets* from every host of *fleet* into --collect's DIR; why some are
    missing, "" when none is."""
    from ..tracing import collect

    return collect.monitors(fleet, targets, args.collect, args.collect_timeout, quiet)


def _raise(missing: str) -> None:
    if missing:
        raise CliError(missing)


def _send(target: Target, monitor: Any, args: Namespace) -> CommandResponse:
    """The command; a C++ daemon (msMonitor's) has no live reports to watch."""
    from ..edge.rpc import Daemon

    needs = ["npu-monitor --watch"] if args.watch else []
    return Daemon(target, "dyno npu-monitor").command(NPUMONITOR, monitor, needs)


_STATUS_HEADERS = ("PID", "RANK", "JOB", "MONITOR")


def _status(target: Target, targets: Targets) -> None:
    processes = _monitors(target, targets)
    if target.json:
        print_json(_status_json(processes))
    else:
        print(table(_STATUS_HEADERS, _status_rows(processes)))


def _monitors(target: Target, targets: Targets) -> Tuple[ProcessInfo, ...]:
    """The processes *targets* selects, with their monitor state."""
    from ..edge.rpc import Daemon

    return Daemon(target, "npu-monitor --status").processes(targets)


def _status_rows(processes: Sequence[ProcessInfo]) -> List[List[str]]:
    return [[str(p.pid), rank_text(p.rank), str(p.job_id), p.monitor_state.value] for p in processes]


def _status_json(processes: Sequence[ProcessInfo]) -> List[Dict[str, Any]]:
    return [as_dict(p) for p in processes]


COMMAND = Command("npu-monitor", run, FLAGS, across)
