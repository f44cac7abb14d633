"""`dyno respond`'s webhook while a local user trickles requests at it (issue 34, item 4: slowloris).

A real ``dyno respond`` (``--token-file``, the default ``--request-timeout`` 10 s and 128 slots). An
attacker process (``tests/respond_harness.py``'s :class:`Slowloris`) holds N connections, each sending a
request that never ends a byte per PERIOD seconds and reconnecting as soon as the server closes it. Once
the attack has run :data:`SETTLE_S`, this process posts :data:`POSTS` notifications as Alertmanager does,
one a second (so the posts span a deadline), each on a new connection. Per scenario:

* **posts answered 200**, of :data:`POSTS` (before issue 34: 0 of 16 with 40 connections at a byte a
  second, 32 slots and a 10 s timeout per read). Goal: all.
* **slowest post**: seconds from connecting to the answer. Goal: 1 s (no wait for a deadline).
* **longest held**: the longest an attacker's connection stayed open, seen by the attacker (until the
  server's answer or close was readable). Goal: the deadline and a second.
* the server's threads and resident memory at their highest (sampled), reported.

The attacker is a process of its own, as another user's would be, so it does not share this process's
interpreter (the posts') nor the server's. Run time about a minute; figures are not asserted.

    .venv/bin/python benchmarks/respond_slowloris.py [--scenarios 40x1,200x1,500x0.2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from _bench import Figure, free_port, percentile, proc_status, report
from respond_harness import TOKEN, RespondProcess, Slowloris, notification, post

POSTS = 16
SETTLE_S = 3.0  # the attack has taken its connections before the first post
POST_EVERY_S = 1.0
REQUEST_TIMEOUT_S = 10.0  # dyno respond's default
SCENARIOS = "40x1,200x1,500x0.2"


def _attack(port: int, count: int, period: float, stop: Any, results: Any) -> None:
    """The attacker process: the slowloris until *stop*, then what it saw, on *results*."""
    with Slowloris(port, count, period) as attack:
        stop.wait()
    results.put(list(attack.closed))


def _sample(pid: int, stop: threading.Event, peak: Dict[str, int]) -> None:
    """The server's threads and VmRSS at their highest, every 0.1 s until *stop*."""
    while not stop.wait(0.1):
        try:
            now = proc_status(pid, ("VmRSS", "Threads"))
        except OSError:
            return
        for key, value in now.items():
            peak[key] = max(peak.get(key, 0), value)


def _posts(port: int) -> List[Tuple[Any, float]]:
    """:data:`POSTS` posts, one every :data:`POST_EVERY_S`: (status or error name, seconds) each."""
    answers = []
    for _ in range(POSTS):
        began = time.monotonic()
        try:
            status: Any = post(port, notification())[0]
        except OSError as exc:
            status = type(exc).__name__
        answers.append((status, time.monotonic() - began))
        time.sleep(POST_EVERY_S)  # pacing: Alertmanager posts a group at most every group_interval
    return answers


def scenario(respond: RespondProcess, count: int, period: float) -> Dict[str, Any]:
    """One attack of *count* connections at a byte per *period*, and the posts through it."""
    assert respond.proc is not None
    context = multiprocessing.get_context("fork")
    stop, results = context.Event(), context.Queue()
    attacker = context.Process(target=_attack, args=(respond.port, count, period, stop, results))
    peak: Dict[str, int] = {}
    sampling = threading.Event()
    sampler = threading.Thread(target=_sample, args=(respond.proc.pid, sampling, peak))
    attacker.start()
    sampler.start()
    try:
        time.sleep(SETTLE_S)  # the attack takes its connections: measured while it holds them
        answers = _posts(respond.port)
    finally:
        stop.set()
        closed = results.get(timeout=60)
        attacker.join(30)
        sampling.set()
        sampler.join()
    ok = [seconds for status, seconds in answers if status == 200]
    return {
        "connections": count,
        "period_s": period,
        "posts_200": len(ok),
        "statuses": sorted({str(status) for status, _ in answers}),
        "slowest_post_s": max(seconds for _, seconds in answers),
        "p50_post_s": percentile([seconds for _, seconds in answers], 50),
        "attack_connections": len(closed),
        "closed_by": sorted({status for status, _ in closed}),
        "longest_held_s": max((held for _, held in closed), default=0.0),
        "server_threads_peak": peak.get("Threads", 0),
        "server_rss_peak_kib": peak.get("VmRSS", 0),
    }


def figures(result: Dict[str, Any]) -> List[Figure]:
    name = f"{result['connections']} at a byte per {result['period_s']:g} s"
    return [
        Figure(f"{name}: posts answered 200", result["posts_200"], f"of {POSTS}", f">= {POSTS}", "0 before"),
        Figure(f"{name}: slowest post", result["slowest_post_s"], "s", "<= 1"),
        Figure(f"{name}: longest held", result["longest_held_s"], "s", f"<= {REQUEST_TIMEOUT_S + 1:g}"),
        Figure(f"{name}: server threads (peak)", result["server_threads_peak"], "threads"),
        Figure(f"{name}: server RSS (peak)", result["server_rss_peak_kib"] / 1024, "MiB"),
        Figure(f"{name}: lines logged", result["log_lines"], "lines"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=SCENARIOS, help="COUNTxPERIOD,... (default %(default)s)")
    args = parser.parse_args()
    plan = [(int(c), float(p)) for c, _, p in (s.partition("x") for s in args.scenarios.split(","))]
    results = []
    with tempfile.TemporaryDirectory(prefix="msmonitor-bench-") as tmp:
        token = Path(tmp) / "token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o600)
        hosts = Path(tmp) / "hosts"
        hosts.write_text(f"127.0.0.1:{free_port()}\n")  # nobody there: each alert's job is gone
        flags = ["--hosts-from", f"file:{hosts}", "--collect", f"{tmp}/incidents", "--token-file", str(token)]
        respond = RespondProcess(flags, ["--timeout", "2"]).start()
        proc = respond.proc
        assert proc is not None and proc.stdout is not None
        lines: List[str] = []  # its log, read as it comes: a full pipe would stop its writers
        reader = threading.Thread(target=lines.extend, args=(proc.stdout,))
        reader.start()
        try:
            for count, period in plan:
                logged = len(lines)
                results.append({**scenario(respond, count, period), "log_lines": len(lines) - logged})
        finally:
            proc.terminate()
            proc.wait(60)
            reader.join(60)
    notes = [
        f"dyno respond with --request-timeout {REQUEST_TIMEOUT_S:g} and 128 slots; {POSTS} posts, one a "
        f"second, after {SETTLE_S:g} s of attack; the attacker a process of its own",
        "before issue 34 (32 slots, a 10 s timeout per read): 40 connections at a byte a second let 0 of 16 "
        "posts through",
    ]
    report("respond_slowloris", [f for r in results for f in figures(r)], notes, {"scenarios": results})


if __name__ == "__main__":
    main()
