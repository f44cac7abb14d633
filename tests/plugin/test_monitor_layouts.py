"""MSPTI record parsing from synthetic buffers: both walks, both modes, NULL names, markers, filters."""

import unittest

from mspti_synth import BASE_NS, BufferBuilder

from msmonitor_contract.activity import HOST, Kind
from msmonitor_plugin.monitor.aggregate import Aggregator
from msmonitor_plugin.monitor.buffer_parser import BufferParser
from msmonitor_plugin.monitor.filters import KEEP_ALL, Filter
from msmonitor_plugin.monitor.layouts import LAYOUTS, NameTable, WalkError, runs_at, stride_offsets
from msmonitor_plugin.monitor.markers import MarkerPairer, MarkerPoint
from msmonitor_plugin.monitor.records import (
    UNNAMED,
    CommunicationExtras,
    HcclExtras,
    HostExtras,
    MarkerExtras,
    MemoryExtras,
)

T = BASE_NS


def mixed_buffer() -> BufferBuilder:
    b = BufferBuilder()
    for i in range(5):
        b.kernel(T + i * 100, T + i * 100 + 10 * (i + 1), device=1, name="matmul" if i % 2 else "add", corr=i)
    b.api(T, T + 50, name="aclnnMatmul").api(T, T + 30, name=None, kind=Kind.ACL_API)
    b.kernel(T, T + 7, device=0, name=None)
    b.communication(T, T + 400, device=1).hccl(T, T + 300, device=1)
    b.memory(T, T + 5, op=1).memset(T, T + 6).memcpy(T, T + 8, copy_kind=3)
    b.marker_range(1, T, T + 1000, "fwd", device=1, domain="train")
    return b


class LayoutTest(unittest.TestCase):
    def test_layout_sizes_are_the_documented_c_sizeof(self):
        sizes = {
            k: LAYOUTS[k].size for k in (Kind.KERNEL, Kind.API, Kind.HCCL, Kind.COMMUNICATION, Kind.MARKER)
        }
        self.assertEqual(
            sizes, {Kind.KERNEL: 56, Kind.API: 48, Kind.HCCL: 56, Kind.COMMUNICATION: 72, Kind.MARKER: 56}
        )
        self.assertEqual([LAYOUTS[k].size for k in (Kind.MEMORY, Kind.MEMSET, Kind.MEMCPY)], [64, 56, 56])


class AggregateModeTest(unittest.TestCase):
    def parse(self, b, flt=KEEP_ALL, offsets=None):
        parser = BufferParser(records=False, flt=flt)
        view = b.view()
        return parser.parse(view, len(view), NameTable(b.strings.read), offsets=offsets)

    def rows_by(self, result):
        return {(kind, dev, name): (c, t, mn, mx) for kind, dev, name, c, t, mn, mx in result.rows}

    def test_sums_per_kind_device_and_name_without_objects_per_record(self):
        rows = self.rows_by(self.parse(mixed_buffer()))
        self.assertEqual(rows[(Kind.KERNEL, 1, "add")], (3, 10 + 30 + 50, 10, 50))
        self.assertEqual(rows[(Kind.KERNEL, 1, "matmul")], (2, 20 + 40, 20, 40))
        self.assertEqual(rows[(Kind.API, HOST, "aclnnMatmul")], (1, 50, 50, 50))
        self.assertEqual(rows[(Kind.ACL_API, HOST, UNNAMED)], (1, 30, 30, 30))
        self.assertEqual(rows[(Kind.KERNEL, 0, UNNAMED)], (1, 7, 7, 7))
        self.assertEqual(rows[(Kind.COMMUNICATION, 1, "allreduce")], (1, 400, 400, 400))
        self.assertEqual(rows[(Kind.HCCL, 1, "hcom_allReduce_1")], (1, 300, 300, 300))
        self.assertEqual(rows[(Kind.MEMORY, 0, "RELEASE")], (1, 5, 5, 5))
        self.assertEqual(rows[(Kind.MEMSET, 0, "MEMSET_ASYNC")], (1, 6, 6, 6))
        self.assertEqual(rows[(Kind.MEMCPY, 0, "DTOH")], (1, 8, 8, 8))

    def test_null_names_become_unnamed_and_are_counted(self):
        result = self.parse(mixed_buffer())
        self.assertEqual(result.counts["unnamed"], 2)
        self.assertEqual(result.counts["records"], 5 + 2 + 1 + 2 + 3 + 4)

    def test_strides_and_mspti_offsets_give_the_same_result(self):
        b = mixed_buffer()
        by_stride = self.parse(b)
        by_offsets = self.parse(b, offsets=b.offsets)
        self.assertEqual(self.rows_by(by_stride), self.rows_by(by_offsets))
        self.assertEqual(by_stride.records, by_offsets.records)

    def test_interleaved_kinds_are_taken_record_by_record_with_the_same_result(self):
        b = BufferBuilder()
        for i in range(40):
            b.kernel(T, T + i, device=i % 3, name=f"k{i % 4}") if i % 2 else b.api(
                T, T + 2 * i, name=f"a{i % 5}"
            )
            if i % 13 == 0:
                b.communication(T, T + 9)
        self.assertEqual(self.rows_by(self.parse(b)), self.rows_by(self.parse(b, offsets=b.offsets)))

    def test_larger_records_are_read_at_the_offsets_mspti_gives(self):
        b = BufferBuilder()
        b.kernel(T, T + 5, name="a")
        b.data += b"\0" * 8  # a newer library's record carries 8 more bytes
        b.kernel(T, T + 7, name="a")
        view = b.view()
        with self.assertRaises(WalkError):
            stride_offsets(view, len(view))
        self.assertEqual(runs_at(view, [0, 64]), [(0, Kind.KERNEL, 1), (64, Kind.KERNEL, 1)])
        rows = self.rows_by(self.parse(b, offsets=[0, 64]))
        self.assertEqual(rows[(Kind.KERNEL, 0, "a")], (2, 12, 5, 7))

    def test_unknown_or_unconfirmed_kinds_stop_a_stride_walk(self):
        b = mixed_buffer()
        view = b.view()
        parser = BufferParser()
        with self.assertRaises(WalkError):
            parser.parse(view, len(view), NameTable(b.strings.read), allowed=frozenset({int(Kind.KERNEL)}))
        garbage = memoryview(bytes(b.data) + (99).to_bytes(4, "little") + bytes(52))
        with self.assertRaises(WalkError):
            parser.parse(garbage, len(garbage), NameTable(b.strings.read))

    def test_filter_applies_per_name_with_msmonitor_semantics(self):
        rows = self.rows_by(self.parse(mixed_buffer(), flt=Filter.parse("Kernel:mat;Communication:all")))
        kinds = {k for k, _, _ in rows}
        self.assertIn((Kind.KERNEL, 1, "matmul"), rows)
        self.assertNotIn((Kind.KERNEL, 1, "add"), rows)
        self.assertNotIn((Kind.KERNEL, 0, UNNAMED), rows)  # no name: dropped when Kernel is filtered
        self.assertNotIn(Kind.API, kinds)  # not named in the filter: dropped
        self.assertIn(Kind.COMMUNICATION, kinds)
        self.assertTrue({Kind.MEMORY, Kind.MEMSET, Kind.MEMCPY} <= kinds)  # never filtered

    def test_rows_merge_into_an_aggregator(self):
        agg = Aggregator(top_n=1)
        agg.merge(self.parse(mixed_buffer()).rows)
        report = agg.take(seq=1, pid=1, backend="mspti", start_ns=0, end_ns=10)
        kernel1 = report.find(Kind.KERNEL, 1)[0]
        self.assertEqual((kernel1.count, kernel1.total_ns, kernel1.min_ns, kernel1.max_ns), (5, 150, 10, 50))
        self.assertEqual([n.name for n in kernel1.top], ["add"])
        self.assertEqual((kernel1.other.count, kernel1.other.total_ns), (2, 60))


class RecordModeTest(unittest.TestCase):
    def records(self, b):
        view = b.view()
        return BufferParser(records=True).parse(view, len(view), NameTable(b.strings.read)).records

    def test_every_field_of_every_kind(self):
        by_kind = {}
        for r in self.records(mixed_buffer()):
            by_kind.setdefault(r.kind, []).append(r)
        k = by_kind[Kind.KERNEL][1]
        self.assertEqual(
            (k.start_ns, k.end_ns, k.device, k.stream, k.correlation_id), (T + 100, T + 120, 1, 3, 1)
        )
        self.assertEqual((k.name, k.type), ("matmul", "KERNEL_AIVEC"))
        self.assertEqual(by_kind[Kind.API][0].extras, HostExtras(100, 101))
        self.assertEqual(by_kind[Kind.ACL_API][0].name, UNNAMED)
        comm = by_kind[Kind.COMMUNICATION][0]
        self.assertEqual(comm.extras, CommunicationExtras(1024, "FP16", "group_0", "RING"))
        self.assertEqual((comm.stream, comm.correlation_id), (5, 9))
        self.assertEqual(by_kind[Kind.HCCL][0].extras, HcclExtras(12.5, "group_0"))
        self.assertEqual(by_kind[Kind.MEMORY][0].extras, MemoryExtras(4096, 0x1000))
        self.assertEqual(by_kind[Kind.MEMSET][0].extras, MemoryExtras(4096, 0, True))
        self.assertEqual(by_kind[Kind.MEMCPY][0].name, "DTOH")
        host, device = sorted(by_kind[Kind.MARKER], key=lambda r: r.device)
        self.assertEqual((host.device, host.start_ns, host.end_ns, host.name), (HOST, T, T + 1000, "fwd"))
        self.assertEqual(host.extras, MarkerExtras("train", "Host", 16, 1, 100, 101))
        self.assertEqual(
            (device.device, device.stream, device.start_ns, device.end_ns), (1, 7, T + 10, T + 1010)
        )
        self.assertEqual((device.name, device.domain, device.extras.source), ("fwd", "train", "Device"))


# One argument per field of the MarkerPoint it builds: the point is the grouping.
def point(flag, source, ts, mid, name=None, a=0, b=0):  # noqa: PLR0913
    return MarkerPoint(flag, source, ts, mid, a, b, name, None)


class MarkerPairerTest(unittest.TestCase):
    def feed(self, pairer, points, flt=KEEP_ALL):
        return [r for r, _ in (pairer.feed(p, flt) for p in points) if r is not None]

    def test_instant_markers_are_zero_length_and_default_domain(self):
        (r,) = self.feed(MarkerPairer(), [point(1, 0, 5, 1, "mark")])
        self.assertEqual((r.start_ns, r.end_ns, r.name, r.domain), (5, 5, "mark", "default"))

    def test_ranges_pair_across_feeds_and_unmatched_ends_are_counted(self):
        pairer = MarkerPairer()
        self.assertEqual(self.feed(pairer, [point(2, 0, 10, 7, "step")]), [])
        (r,) = self.feed(pairer, [point(4, 0, 30, 7)])
        self.assertEqual((r.start_ns, r.end_ns, r.name), (10, 30, "step"))
        self.feed(pairer, [point(4, 0, 40, 8)])
        self.assertEqual(pairer.unmatched, 1)

    def test_open_ranges_are_bounded(self):
        pairer = MarkerPairer(max_open=3)
        self.feed(pairer, [point(2, 0, i, i, "r") for i in range(10)])
        self.assertEqual(pairer.unmatched, 7)

    def test_a_filtered_range_is_dropped_on_host_and_device(self):
        pairer = MarkerPairer()
        flt = Filter.parse("Marker:keep")
        points = [point(16, 0, 0, 1, "other"), point(16, 1, 1, 1), point(32, 1, 2, 1), point(32, 0, 3, 1)]
        results = [pairer.feed(p, flt) for p in points]
        self.assertEqual([r for r, _ in results], [None] * 4)
        self.assertEqual(sum(filtered for _, filtered in results), 2)  # the host range and the device range


if __name__ == "__main__":
    unittest.main()
