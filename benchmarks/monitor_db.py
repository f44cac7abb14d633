"""The npu-monitor ``--export-type DB`` writer: records per second into the SQLite file, per core.

The records are what the MSPTI backend hands the writer thread in log-file mode — a realistic mix in
runs, as buffers deliver them: kernels (200 names, two devices), CANN API calls, communication ops,
host and device marker ranges, and a few memory copies — written in batches of ``--batch`` records
(one MSPTI buffer's worth) through :class:`~msmonitor_plugin.monitor.msprof_db.SqliteWriter`, as the
:class:`~msmonitor_plugin.monitor.writers.WriterThread` calls it, then closed (the constant tables,
STRING_IDS and the rank-device map written at the end). The figure is records over the CPU time of the
writing thread (``time.thread_time``), median over the rounds, each round a fresh file on the same
disk. The file's size per record is shown beside it.

The goal: the writer keeps up — the same records/s as the DB writer before issue 26 (one table per kind,
measured with this script at that commit: the JSON's ``details.baseline``).

    .venv/bin/python benchmarks/monitor_db.py [--records 400000] [--batch 8192] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from typing import List, Tuple

from _bench import Figure, report
from msmonitor_contract.activity import HOST, Kind
from msmonitor_plugin.monitor.msprof_db import SqliteWriter
from msmonitor_plugin.monitor.records import (
    CommunicationExtras,
    HostExtras,
    MarkerExtras,
    MemoryExtras,
    Record,
)

BASE_NS = 1_700_000_000_000_000_000
RUN = 64  # records of one kind in a row, as MSPTI buffers deliver them


def _record(i: int, rnd: random.Random) -> Record:
    """Record *i* of the mix: per run of RUN, mostly kernels and API calls, some of everything else."""
    t = BASE_NS + i * 1000
    slot = (i // RUN) % 16
    if slot < 8:
        name, dur = f"op_{rnd.randrange(200)}", rnd.randrange(500, 50000)
        return Record(Kind.KERNEL, t, t + dur, i % 2, 3, i, name, "KERNEL_AIVEC")
    if slot < 13:
        name, dur = f"aclnn_{rnd.randrange(200)}", rnd.randrange(200, 5000)
        return Record(Kind.API, t, t + dur, HOST, 0, i, name, "", HostExtras(4242, 4243 + i % 4))
    if slot == 13:
        comm = CommunicationExtras(1 << 20, "FP16", f"group_{i % 3}", "RING")
        return Record(Kind.COMMUNICATION, t, t + 90000, i % 2, 5, i, f"hcom_allReduce_{i % 4}", "", comm)
    if slot == 14:
        device = i % 3 - 1  # host and device ranges
        source = "Host" if device == HOST else "Device"
        marker = MarkerExtras("train", source, 2 if device == HOST else 16, i, 4242, 4243)
        return Record(Kind.MARKER, t, t + 100000, device, 7, 0, f"step_{i % 8}", "", marker)
    return Record(Kind.MEMCPY, t, t + 2000, i % 2, 6, i, "HTOD", "", MemoryExtras(8192, 0, True))


def records(count: int) -> List[Record]:
    rnd = random.Random(1)
    return [_record(i, rnd) for i in range(count)]


def one_round(batches: List[List[Record]]) -> Tuple[float, int]:
    """(CPU seconds of writing and closing, bytes of the file)."""
    with tempfile.TemporaryDirectory(prefix="msmonitor-db-bench-") as tmp:
        start = time.thread_time()
        writer = SqliteWriter(tmp, 4242, 3, backend="mspti")
        for batch in batches:
            writer.write(batch)
        writer.close()
        cpu = time.thread_time() - start
        size = sum(os.path.getsize(os.path.join(tmp, name)) for name in os.listdir(tmp))
    return cpu, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--batch", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=float, default=0.0, help="records/s before issue 26 (the goal)")
    args = parser.parse_args()
    mix = records(args.records)
    batches = [mix[i : i + args.batch] for i in range(0, len(mix), args.batch)]
    rounds = [one_round(batches) for _ in range(args.rounds)]
    cpu = statistics.median(r[0] for r in rounds)
    size = rounds[-1][1]
    figures = [
        Figure(
            "DB writer: records/s per core (median)",
            args.records / cpu,
            "records/s",
            goal=f">= {args.baseline:.0f}" if args.baseline else "",
        ),
        Figure("DB file: bytes per record", size / args.records, "B"),
    ]
    notes = [
        f"{args.records} records in batches of {args.batch}, {args.rounds} rounds; the writing thread's CPU",
        "goal: the records/s of the DB writer before issue 26 (--baseline), when given",
    ]
    details = {"rounds_cpu_s": [r[0] for r in rounds], "baseline": args.baseline}
    report("monitor_db", figures, notes, details)


if __name__ == "__main__":
    main()
