"""The fan-out's runner and printing, in-process with stand-in ``ask`` functions: concurrency bounded by
--parallel, each host's outcome typed and in the order given, the summary and the exit status."""

from __future__ import annotations

import collections
import contextlib
import threading
from typing import Counter, Iterator, List

import pytest

from dyno.exits import EXIT_FAILED, EXIT_UNREACHABLE, CliError
from dyno.fleet import fanout
from dyno.fleet.target import Target
from harness import wait_until

VIEW = fanout.View(("ANSWER",), lambda answer: [[str(answer)]], lambda answer: {"value": answer})


def fleet(*names: str) -> List[Target]:
    return [Target(hostname=name) for name in names]


def test_parallel_bounds_the_hosts_asked_at_once_and_outcomes_keep_the_hosts_order():
    gate, lock = threading.Event(), threading.Lock()
    now, most = [0], [0]

    def ask(target: Target) -> str:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        gate.wait(10)
        with lock:
            now[0] -= 1
        return target.hostname.upper()

    names = [f"n{i}" for i in range(10)]
    done: List[List[fanout.Outcome]] = []
    runner = threading.Thread(target=lambda: done.append(fanout.gather(fleet(*names), ask, 3)))
    runner.start()
    wait_until(lambda: now[0] == 3, what="three hosts in flight")
    gate.set()
    runner.join(10)
    assert most[0] == 3
    assert [(o.host, o.answer, o.state) for o in done[0]] == [(n, n.upper(), "effective") for n in names]


def test_failures_become_typed_outcomes_by_their_exit_code_and_reason():
    def ask(target: Target) -> str:
        if target.hostname == "down":
            raise CliError(
                "cannot reach dynolog at down:1778: refused\nCheck that...", EXIT_UNREACHABLE, "refused"
            )
        if target.hostname == "denied":
            raise CliError("dynolog at denied:1778 answered PERMISSION_DENIED: read-only", EXIT_FAILED)
        return "ok" if target.hostname == "good" else "busy"

    judge = lambda answer: "" if answer == "ok" else f"it said {answer}"  # noqa: E731
    outcomes = fanout.gather(fleet("good", "down", "denied", "busy"), ask, 64, judge)
    assert [(o.host, o.state, o.reason, o.why) for o in outcomes] == [
        ("good", "effective", "", ""),
        ("down", "unreachable", "refused", "cannot reach dynolog at down:1778: refused"),
        ("denied", "ineffective", "", "dynolog at denied:1778 answered PERMISSION_DENIED: read-only"),
        ("busy", "ineffective", "", "it said busy"),
    ]
    assert fanout.summary(outcomes) == "4 hosts: 1 effective, 2 ineffective, 1 unreachable (1 refused)"
    assert [fanout.host_json(o, VIEW) for o in outcomes[:2]] == [
        {"host": "good", "state": "effective", "answer": {"value": "ok"}},
        {"host": "down", "state": "unreachable", "reason": "refused", "why": outcomes[1].why},
    ]


def test_one_table_with_a_host_column_then_the_hosts_that_gave_no_answer():
    outcomes = [
        fanout.Outcome("node01", "first"),
        fanout.Outcome("node02", "second"),
        fanout.Outcome("node03", None, fanout.UNREACHABLE, "cannot reach dynolog", "timeout"),
    ]
    assert fanout.render(outcomes, VIEW).splitlines() == [
        "HOST    ANSWER",
        "node01  first",
        "node02  second",
        "node03  unreachable (timeout): cannot reach dynolog",
    ]


def verdict_of(*states: str) -> int:
    outcomes = [fanout.Outcome(f"node{i}", None, state) for i, state in enumerate(states, 1)]
    try:
        fanout.verdict(outcomes)
    except CliError as exc:
        return exc.exit_code
    return 0


def test_exit_status_0_all_effective_1_some_not_3_none_reached():
    assert verdict_of("effective", "effective") == 0
    assert verdict_of("effective", "ineffective") == 1
    assert verdict_of("effective", "unreachable") == 1
    assert verdict_of("ineffective", "unreachable") == 1
    assert verdict_of("unreachable", "unreachable") == 3
    with pytest.raises(CliError, match=r"2 of 3 hosts did not answer effective: node\[2-3\]"):
        fanout.verdict(
            [fanout.Outcome("node1"), *(fanout.Outcome(f"node{i}", None, "ineffective") for i in (2, 3))]
        )


def test_later_phases_replace_a_hosts_outcome_and_keep_its_place():
    probes = [fanout.Outcome("a", None, fanout.UNREACHABLE), fanout.Outcome("b", "probe")]
    sent = [fanout.Outcome("b", "sent"), fanout.Outcome("c", "sent")]
    assert [(o.host, o.answer) for o in fanout.merge(probes, sent)] == [
        ("a", None),
        ("b", "sent"),
        ("c", "sent"),
    ]


def test_streams_merge_and_one_that_ends_says_why_and_is_opened_again(monkeypatch):
    monkeypatch.setattr(fanout, "RECONNECT_S", (0.01, 0.04))
    opened: Counter[str] = collections.Counter()

    def open_stream(target: Target) -> Iterator[str]:
        opened[target.hostname] += 1
        if target.hostname == "gone" and opened["gone"] <= 2:
            raise CliError("cannot reach dynolog at gone:1778: refused", EXIT_UNREACHABLE, "refused")
        yield f"{target.hostname}-{opened[target.hostname]}"  # one item each time, then the stream ends

    threads = threading.active_count()
    seen: List[fanout.Event] = []
    with contextlib.closing(fanout.stream(fleet("a", "gone", "b"), open_stream)) as batches:
        for batch in batches:
            seen += batch
            if {"a-2", "b-2", "gone-3"} <= {e.item for e in seen}:
                break
    ends = [(e.host, e.why, e.reason, e.retry_s) for e in seen if e.item is None]
    refused = ("cannot reach dynolog at gone:1778: refused", "refused")
    # While it fails the wait doubles; a stream that gave something is opened again after the first wait.
    assert [end for end in ends if end[0] == "gone"][:2] == [
        ("gone", *refused, 0.01),
        ("gone", *refused, 0.02),
    ]
    assert {end for end in ends if end[0] != "gone"} == {
        ("a", "the daemon ended the stream", "", 0.01),
        ("b", "the daemon ended the stream", "", 0.01),
    }
    # Closed: no stream is opened again, and every stream's thread ends.
    wait_until(lambda: threading.active_count() == threads, what="the streams' threads to end")
