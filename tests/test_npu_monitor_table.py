"""`dyno npu-monitor --watch`'s table: which figures are of a sampling window, and what they estimate."""

from __future__ import annotations

from dyno.watch import render
from dynoproto import dynolog_pb2 as pb

S = 1_000_000_000


def report(rank: int, backend: str, sampled_ns: int, count: int) -> pb.MetricsReport:
    kernel = pb.KindStats(kind="Kernel", device=-1, count=count, total_ns=count * 1000, max_ns=1000)
    kernel.top.add(name="aten::addmm", count=count, total_ns=count * 1000)
    return pb.MetricsReport(
        rank=rank, pid=100 + rank, backend=backend, start_ns=0, end_ns=10 * S, sampled_ns=sampled_ns,
        kinds=[kernel],
    )  # fmt: skip


def test_whole_interval_reports_have_no_estimate_column_or_note() -> None:
    # MSPTI's reports observe the whole interval; msMonitor's do not say (0): both are whole.
    text = render([("node1", report(0, "mspti", 10 * S, 40)), ("node1", report(1, "mspti", 0, 40))])
    lines = text.splitlines()
    assert lines[1].split()[:5] == ["HOST/RANK", "KIND", "DEVICE", "COUNT", "TOTAL"]
    assert not any("*" in line or "sampled" in line for line in lines)


def test_a_sampled_report_is_marked_noted_and_estimated_beside_a_whole_one() -> None:
    text = render([("node1", report(0, "torch", S // 4, 5)), ("node2", report(1, "mspti", 10 * S, 40))])
    header, *rows = text.splitlines()[1:]
    assert header.split()[:6] == ["HOST/RANK", "KIND", "DEVICE", "COUNT", "EST.", "COUNT"]
    assert rows[0].split()[:5] == ["node1/0*", "Kernel", "host", "5", "~200"]
    assert rows[1].split()[:2] == ["5", "~200"], "a top name is estimated too"
    assert rows[2].split()[:4] == ["node2/1", "Kernel", "host", "40"], "a whole report: no estimate"
    assert rows[4] == (
        "* node1/0: torch backend sampled 0.25 s of the 10.0 s interval (2%): COUNT and TOTAL are of that "
        "window; EST. COUNT is COUNT scaled to the interval, an estimate that assumes the window is typical"
    )
