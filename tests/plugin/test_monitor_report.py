"""Aggregation (bounded), the Report's JSON, chunks under a byte budget, and msMonitor data messages."""

import json
import random
import unittest

from msmonitor_contract.activity import HOST, OTHER, Kind
from msmonitor_contract.report import ChunkAssembler, Report, ReportError
from msmonitor_plugin.monitor.aggregate import Aggregator
from msmonitor_plugin.monitor.records import MarkerExtras, Record


def rec(kind, name, duration, device=0, domain=None):
    extras = MarkerExtras(domain, "Host", 2, 1) if domain else None
    return Record(kind, 1000, 1000 + duration, device, 0, 0, name, "", extras)


def assemble(chunks):
    """What the receiving side makes of *chunks*: the reports completed, in order."""
    assembler = ChunkAssembler()
    return [r for r in map(assembler.add, chunks) if r is not None]


def take(agg, **kw):
    return agg.take(seq=kw.pop("seq", 1), pid=42, backend="test", start_ns=0, end_ns=10**9, **kw)


class AggregatorTest(unittest.TestCase):
    def test_per_kind_and_device_stats_and_top_names(self):
        agg = Aggregator(top_n=2)
        for name, d in [("a", 10), ("b", 30), ("c", 5), ("b", 40), ("a", 1)]:
            agg.add(rec(Kind.KERNEL, name, d, device=3))
        agg.add(rec(Kind.API, "x", 7, device=HOST))
        report = take(agg)
        (kernel,) = report.find(Kind.KERNEL)
        self.assertEqual(
            (kernel.device, kernel.count, kernel.total_ns, kernel.min_ns, kernel.max_ns), (3, 5, 86, 1, 40)
        )
        self.assertEqual(
            [(n.name, n.count, n.total_ns, n.mean_ns) for n in kernel.top],
            [("b", 2, 70, 35.0), ("a", 2, 11, 5.5)],
        )
        self.assertEqual((kernel.other.name, kernel.other.count, kernel.other.total_ns), (OTHER, 1, 5))
        self.assertEqual(kernel.distinct, 3)
        self.assertEqual(report.find(Kind.API)[0].device, HOST)
        self.assertEqual(take(agg, seq=2).kinds, [])  # take() starts a new interval

    def test_markers_are_keyed_by_domain_and_name(self):
        agg = Aggregator()
        agg.add(rec(Kind.MARKER, "step", 5, HOST, domain="train"))
        agg.add(rec(Kind.MARKER, "step", 7, HOST, domain="eval"))
        (markers,) = take(agg).kinds
        self.assertEqual(
            sorted((n.domain, n.name, n.total_ns) for n in markers.top),
            [("eval", "step", 7), ("train", "step", 5)],
        )

    def test_memory_is_bounded_whatever_the_number_of_names(self):
        agg = Aggregator(top_n=3, max_names=100, max_groups=4)
        for i in range(10000):
            agg.add(rec(Kind.KERNEL, f"kernel_{i}", 1))
        for device in range(10):
            agg.add(rec(Kind.API, "x", 1, device=device))
        report = take(agg)
        (kernel,) = report.find(Kind.KERNEL)
        self.assertEqual(kernel.count, 10000)
        self.assertEqual(kernel.other.count, 10000 - 3)
        self.assertEqual(kernel.distinct, 101)  # the table, plus one <other> bucket
        self.assertEqual(len(report.kinds), 4)
        self.assertEqual(report.dropped, {"groups_overflow": 7})

    def test_drops_and_counters_are_reported_per_interval(self):
        agg = Aggregator()
        agg.drop("buffer_requests_declined", 2)
        agg.count("unnamed", 5)
        report = take(agg, unavailable={"Hccl": "why"}, sampled_ns=5)
        self.assertEqual((report.dropped, report.counters), ({"buffer_requests_declined": 2}, {"unnamed": 5}))
        self.assertEqual((report.unavailable, report.sampled_ns), ({"Hccl": "why"}, 5))
        self.assertEqual(take(agg).dropped, {})


def big_report(names=3000, seed=1):
    rnd = random.Random(seed)
    agg = Aggregator(top_n=names)
    for kind in (Kind.KERNEL, Kind.API, Kind.MARKER):
        for i in range(names):
            agg.add(
                rec(
                    kind,
                    f"{kind.label}_{i}_" + "x" * rnd.randrange(200),
                    rnd.randrange(1, 10**6),
                    domain="d" if kind == Kind.MARKER else None,
                )
            )
    agg.drop("filtered", 3)
    return take(agg, unavailable={"Hccl": "not here"}, final=True)


class ReportTest(unittest.TestCase):
    def test_json_round_trip(self):
        report = big_report(names=50)
        self.assertEqual(Report.from_dict(json.loads(report.to_json())), report)
        doc = json.loads(report.to_json())
        self.assertEqual(doc["kinds"][0]["top"][0].keys() >= {"name", "count", "total_ns", "mean_ns"}, True)

    def test_bad_documents_raise_report_error(self):
        for doc in ({}, {"v": 99}, {"v": 1, "seq": "x"}):
            with self.assertRaises(ReportError):
                Report.from_dict(doc)

    def test_chunks_fit_the_budget_and_merge_back(self):
        report = big_report()
        chunks = report.to_chunks(48 * 1024)
        self.assertGreater(len(chunks), 10)
        self.assertTrue(all(len(c) <= 48 * 1024 for c in chunks))
        self.assertEqual(assemble(chunks), [report])
        report = big_report(names=1000)  # at most MAX_PARTS chunks, as a receiver takes
        small = report.to_chunks(4096)  # a kind's top list is split across chunks
        self.assertTrue(all(len(c) <= 4096 for c in small))
        self.assertEqual(assemble(list(reversed(small))), [report])

    def test_a_small_report_is_one_chunk(self):
        report = big_report(names=3)
        (chunk,) = report.to_chunks()
        self.assertEqual(ChunkAssembler().add(chunk), report)

    def test_assembler_takes_chunks_in_any_order_and_forgets_lost_reports(self):
        assembler = ChunkAssembler(max_pending=2)
        report = big_report()
        chunks = report.to_chunks(16 * 1024)
        rnd = random.Random(3)
        rnd.shuffle(chunks)
        results = [assembler.add(c) for c in chunks]
        self.assertEqual([r for r in results if r is not None], [report])
        for seq in range(5):  # reports that lost a chunk: only the newest few stay pending
            lost = Report(
                seq=100 + seq, pid=1, backend="x", start_ns=0, end_ns=1, sampled_ns=1, kinds=report.kinds
            )
            assembler.add(lost.to_chunks(16 * 1024)[0])
        self.assertEqual(assembler.incomplete, 3)

    def test_incomplete_or_mixed_chunks_make_no_report(self):
        chunks = big_report().to_chunks(16 * 1024)
        self.assertEqual(assemble(chunks[1:]), [])
        other = big_report(seed=2)
        other.seq = 2
        self.assertEqual(assemble(chunks[:1] + other.to_chunks(16 * 1024)[1:]), [])
        with self.assertRaises(ReportError):
            ChunkAssembler().add(b'{"part": 3, "parts": 2}')

    def test_data_messages_are_msmonitors(self):
        agg = Aggregator()
        agg.add(rec(Kind.KERNEL, "k", 10, device=1))
        agg.add(rec(Kind.KERNEL, "k", 5, device=1))
        agg.add(rec(Kind.API, "a", 3, device=HOST))
        agg.add(rec(Kind.MARKER, "fwd", 8, device=HOST, domain="train"))
        messages = take(agg).data_messages()
        self.assertIn({"kind": "Kernel", "deviceId": 1, "duration": 15, "timestamp": 10**9}, messages)
        self.assertIn({"kind": "API", "deviceId": -1, "duration": 3, "timestamp": 10**9}, messages)
        self.assertIn(
            {
                "kind": "Marker",
                "deviceId": -1,
                "duration": 8,
                "timestamp": 10**9,
                "domain": "train",
                "name": "fwd",
            },
            messages,
        )


if __name__ == "__main__":
    unittest.main()
