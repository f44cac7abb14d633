"""npu-monitor config keys and the --filter format, with msMonitor's semantics."""

import unittest

from msmonitor_contract import configtext
from msmonitor_contract.activity import Kind
from msmonitor_contract.kinds import NPUMONITOR
from msmonitor_plugin.monitor.config import ConfigError, ExportType, MonitorConfig
from msmonitor_plugin.monitor.filters import Filter

BASE = {
    "NPU_MONITOR_START": "true",
    "NPU_MONITOR_STOP": "false",
    "REPORT_INTERVAL_S": "10",
    "DURATION": "0",
    "MSPTI_ACTIVITY_KIND": "Kernel,API",
    "NPU_MONITOR_LOG_FILE": "",
    "NPU_MONITOR_EXPORT_TYPE": "DB",
}


def parse(**changes):
    return MonitorConfig.parse(dict(BASE, **changes))


class ConfigTest(unittest.TestCase):
    def test_parses_every_key(self):
        config = parse(
            DURATION="2.5",
            NPU_MONITOR_LOG_FILE="/tmp/mon",
            NPU_MONITOR_EXPORT_TYPE="jsonl",
            JSONL_ROTATE_LOG_LINES="200",
            JSONL_ROTATE_LOG_FILES="3",
            NPU_MONITOR_FILTER="Kernel:mat",
            TOP_N="5",
            NPU_MONITOR_STOP="False",
        )
        self.assertEqual(
            (config.start, config.stop, config.report_interval_s, config.duration_s), (True, False, 10, 2.5)
        )
        self.assertEqual(config.kinds, frozenset({Kind.KERNEL, Kind.API}))
        self.assertEqual((config.log_dir, config.export_type), ("/tmp/mon", ExportType.JSONL))
        self.assertEqual((config.rotate_lines, config.rotate_files, config.top_n), (200, 3, 5))
        self.assertEqual(config.filter, Filter.parse("Kernel:mat"))

    def test_reads_what_the_key_table_renders_even_indented_and_commented(self):
        values = {
            "NPU_MONITOR_START": True,
            "NPU_MONITOR_STOP": False,
            "REPORT_INTERVAL_S": 10,
            "DURATION": 0,
            "MSPTI_ACTIVITY_KIND": ["Kernel", "API"],
            "NPU_MONITOR_LOG_FILE": "",
            "NPU_MONITOR_EXPORT_TYPE": "DB",
            "JSONL_ROTATE_LOG_LINES": "300",
            "NPU_MONITOR_FILTER": "Kernel:a,b;API:c",
        }
        rendered = configtext.render(NPUMONITOR.keys, values)
        text = "# npu-monitor\n" + "".join(f"    {line}\n" for line in rendered.splitlines())
        config = MonitorConfig.parse(configtext.parse(text))
        self.assertEqual(config, parse(NPU_MONITOR_FILTER="Kernel:a,b;API:c", JSONL_ROTATE_LOG_LINES="300"))
        self.assertEqual(configtext.parse("A=1\n\n  B = x=y \n"), {"A": "1", "B": "x=y"})
        with self.assertRaisesRegex(configtext.ConfigTextError, "'not a pair' is not KEY=VALUE"):
            configtext.parse("A=1\nnot a pair\n")

    def test_required_keys_and_bad_values_name_the_key(self):
        for key in BASE:
            keys = dict(BASE)
            del keys[key]
            with self.assertRaises(ConfigError) as ctx:
                MonitorConfig.parse(keys)
            self.assertEqual(ctx.exception.key, key)
        bad = {
            "MSPTI_ACTIVITY_KIND": "Kernel,kernel",
            "REPORT_INTERVAL_S": "-1",
            "DURATION": "1s",
            "NPU_MONITOR_START": "1",
            "NPU_MONITOR_EXPORT_TYPE": "csv",
            "NPU_MONITOR_LOG_FILE": "x" * 4097,
            "JSONL_ROTATE_LOG_LINES": "many",
            "TOP_N": "0",
        }
        for key, value in bad.items():
            with self.assertRaises(ConfigError, msg=key) as ctx:
                parse(**{key: value})
            self.assertEqual(ctx.exception.key, key)
            self.assertIn(key, str(ctx.exception))
        with self.assertRaises(ConfigError):
            parse(REPORT_INTERVAL_S=str(2**32))

    def test_every_kind_spelling_and_an_empty_list(self):
        labels = "Marker,Kernel,API,Hccl,Memory,MemSet,MemCpy,Communication,AclAPI,NodeAPI,RuntimeAPI"
        self.assertEqual(len(parse(MSPTI_ACTIVITY_KIND=labels).kinds), 11)
        self.assertEqual(parse(MSPTI_ACTIVITY_KIND="").kinds, frozenset())

    def test_rotation_values_out_of_range_are_clamped_with_a_warning(self):
        config = parse(JSONL_ROTATE_LOG_LINES="5", JSONL_ROTATE_LOG_FILES="1")
        self.assertEqual((config.rotate_lines, config.rotate_files), (100, -1))
        self.assertEqual(len(config.warnings), 2)
        self.assertEqual(parse(JSONL_ROTATE_LOG_LINES="900000").rotate_lines, 500000)
        self.assertEqual(parse(JSONL_ROTATE_LOG_FILES="-1").rotate_files, -1)


class FilterTest(unittest.TestCase):
    def test_empty_filter_keeps_everything(self):
        for text in ("", ";;", "Bogus:x", "Kernel", "Kernel:"):
            flt = Filter.parse(text)
            self.assertFalse(flt.active, text)
            self.assertTrue(flt.keeps(Kind.API, None))

    def test_substring_match_on_named_kinds(self):
        flt = Filter.parse(" Kernel : mat , conv ;API:aclnn")
        self.assertTrue(flt.keeps(Kind.KERNEL, "matmul_v2"))
        self.assertTrue(flt.keeps(Kind.KERNEL, "conv2d"))
        self.assertFalse(flt.keeps(Kind.KERNEL, "add"))
        self.assertFalse(flt.keeps(Kind.KERNEL, "MatMul"))  # case-sensitive
        self.assertTrue(flt.keeps(Kind.API, "aclnnAdd"))

    def test_unnamed_kinds_are_dropped_and_memory_kinds_never_filtered(self):
        flt = Filter.parse("Kernel:mat")
        self.assertFalse(flt.keeps(Kind.COMMUNICATION, "allreduce"))
        self.assertFalse(flt.keeps(Kind.KERNEL, None))
        for kind in (Kind.MEMORY, Kind.MEMSET, Kind.MEMCPY):
            self.assertTrue(flt.keeps(kind, "anything"))

    def test_items_repeat_and_invalid_items_are_skipped(self):
        flt = Filter.parse("Kernel:a;Kernel:b;Nope:c;API:x:y")
        self.assertTrue(flt.keeps(Kind.KERNEL, "xa") and flt.keeps(Kind.KERNEL, "xb"))  # both items
        self.assertFalse(flt.keeps(Kind.KERNEL, "c"))
        self.assertFalse(flt.keeps(Kind.API, "x"), "API:x:y is no item: API is not named, so dropped")

    def test_hccl_is_matched_by_name(self):
        flt = Filter.parse("Hccl:allReduce")
        self.assertTrue(flt.keeps(Kind.HCCL, "hcom_allReduce_1"))
        self.assertFalse(flt.keeps(Kind.HCCL, "hcom_broadcast_1"))

    def test_markers_match_only_named_host_records(self):
        flt = Filter.parse("Marker:fwd")
        self.assertTrue(flt.keeps_marker(0, 2, "fwd_pass"))  # host start
        self.assertFalse(flt.keeps_marker(0, 16, "bwd"))  # host start with device
        self.assertTrue(flt.keeps_marker(0, 4, None))  # host end: kept
        self.assertTrue(flt.keeps_marker(1, 16, None))  # device side: kept
        self.assertFalse(Filter.parse("Kernel:x").keeps_marker(0, 1, "m"))  # Marker not named: dropped


if __name__ == "__main__":
    unittest.main()
