"""--export-type DB against msMonitor's published database (golden/msmonitor_db.json): tables, columns and
types, enums and constant rows, string interning, each record kind's rows and its way back, and files
written by this plugin before (read, upgraded) or by nobody (refused)."""

import contextlib
import io
import json
import os
import re
import socket
import sqlite3
import tempfile
import unittest
from pathlib import Path

from msmonitor_contract.activity import HOST, Kind
from msmonitor_plugin.monitor import db_reader
from msmonitor_plugin.monitor.db_reader import DbFileError
from msmonitor_plugin.monitor.msprof_db import SqliteWriter
from msmonitor_plugin.monitor.msprof_schema import EXTRA_TABLES, calc_hash_id
from msmonitor_plugin.monitor.records import (
    CommunicationExtras,
    HcclExtras,
    HostExtras,
    MarkerExtras,
    MemoryExtras,
    Record,
)

GOLDEN = json.loads((Path(__file__).parent / "golden" / "msmonitor_db.json").read_text(encoding="utf-8"))
U = GOLDEN["unknown_integer"]
PID, RANK = 4242, 3

KERNEL = Record(Kind.KERNEL, 10, 20, 1, 3, 7, "matmul", "KERNEL_AIVEC")
HOST_KERNEL = Record(Kind.KERNEL, 21, 25, HOST, 0, 8, "aten::addmm", "cpu_op_self")
API = Record(Kind.API, 11, 12, HOST, 0, 8, "aclnnAdd", "", HostExtras(100, 101))
ACL_API = Record(Kind.ACL_API, 11, 13, HOST, 0, 9, "aclrtSynchronizeStream", "", HostExtras(100, 102))
RUNTIME_API = Record(Kind.RUNTIME_API, 12, 13, HOST, 0, 10, "rtKernelLaunch", "", HostExtras(100, 101))
COMM = Record(
    Kind.COMMUNICATION,
    13,
    14,
    1,
    0,
    9,
    "hcom_allReduce_",
    "",
    CommunicationExtras(1024, "FP16", "g0", "RING"),
)
TORCH_COMM = Record(Kind.COMMUNICATION, 30, 40, HOST, 0, 12, "c10d::allreduce_", "")
RANGE = Record(Kind.MARKER, 15, 16, HOST, 0, 0, "fwd", "", MarkerExtras("train", "Host", 2, 5, 100, 101))
INSTANT = Record(Kind.MARKER, 17, 17, HOST, 0, 0, "tick", "", MarkerExtras("train", "Host", 1, 6, 100, 101))
CROSSING = Record(
    Kind.MARKER, 18, 19, HOST, 0, 0, "handoff", "", MarkerExtras("default", "Host", 2, 7, 100, 101, 103)
)
DEVICE_RANGE = Record(Kind.MARKER, 15, 16, 1, 7, 0, "fwd", "", MarkerExtras("train", "Device", 16, 5))
HCCL = Record(Kind.HCCL, 17, 18, 1, 4, 0, "hcclKernel", "", HcclExtras(12.5, "g0"))
MEMORY = Record(Kind.MEMORY, 19, 20, 1, 0, 11, "DEVICE", "", MemoryExtras(4096, 0xDEAD))
MEMCPY = Record(Kind.MEMCPY, 17, 18, 1, 6, 9, "HTOD", "", MemoryExtras(8192, 0, True))
MEMSET = Record(Kind.MEMSET, 19, 21, 1, 6, 12, "MEMSET", "", MemoryExtras(64, 0, False))
EVERY_KIND = [
    KERNEL,
    HOST_KERNEL,
    API,
    ACL_API,
    RUNTIME_API,
    COMM,
    TORCH_COMM,
    RANGE,
    INSTANT,
    CROSSING,
    DEVICE_RANGE,
    HCCL,
    MEMORY,
    MEMCPY,
    MEMSET,
]


def order(records):
    return sorted(records, key=lambda r: (r.kind, r.start_ns, r.name, r.device))


class DbTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def written(self, records, backend="mspti"):
        """The file a writer makes of *records*, open; its path in ``self.path``."""
        writer = SqliteWriter(self.dir, PID, RANK, backend=backend)
        writer.write(records)
        writer.close()
        self.path = writer.path
        db = sqlite3.connect(writer.path)
        self.addCleanup(db.close)
        return db


class SchemaTest(DbTest):
    def test_file_name_is_what_msprof_analyze_looks_for(self):
        self.written([KERNEL])
        self.assertRegex(os.path.basename(self.path), GOLDEN["file_name"])
        self.assertTrue(os.path.basename(self.path).endswith(f"_{RANK}.db"))

    def test_every_table_has_msmonitors_columns_and_types(self):
        db = self.written(EVERY_KIND)
        for table, columns in GOLDEN["tables"].items():
            info = db.execute(f"PRAGMA table_info({table})").fetchall()  # cid, name, type, notnull, dflt, pk
            got = [[name, sql, "pk"] if pk else [name, sql] for _, name, sql, _, _, pk in info]
            self.assertEqual(got, columns, table)

    def test_msmonitors_tables_exist_from_the_start_ours_only_when_their_kind_comes(self):
        tables = {row[0] for row in self.written([KERNEL]).execute("SELECT name FROM sqlite_master")}
        self.assertEqual(tables, set(GOLDEN["tables"]))
        tables = {row[0] for row in self.written([MEMCPY]).execute("SELECT name FROM sqlite_master")}
        self.assertEqual(tables - set(GOLDEN["tables"]), {EXTRA_TABLES[Kind.MEMCPY].name})

    def test_enums_and_metadata_are_msmonitors(self):
        db = self.written([KERNEL])
        for table, rows in GOLDEN["enums"].items():
            self.assertEqual([list(r) for r in db.execute(f"SELECT id, name FROM {table} ORDER BY id")], rows)
        meta = dict(db.execute("SELECT name, value FROM META_DATA"))
        self.assertEqual({k: meta[k] for k in GOLDEN["meta_data"]}, GOLDEN["meta_data"])
        self.assertEqual(meta["backend"], "mspti")
        ((uid, host),) = db.execute("SELECT hostUid, hostName FROM HOST_INFO")
        self.assertEqual(host, socket.gethostname())
        self.assertTrue(uid == "" or uid.isdigit(), uid)

    def test_session_devices_and_rank_at_close(self):
        db = self.written([KERNEL, HOST_KERNEL, API])
        self.assertEqual(db.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall(), [(RANK, 1)])
        self.assertEqual(db.execute("SELECT id, name FROM NPU_INFO").fetchall(), [(1, GOLDEN["npu_name"])])
        ((start, end),) = db.execute("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO")
        self.assertLessEqual(start, end)

    def test_host_only_session_maps_its_rank_to_no_device(self):
        db = self.written([HOST_KERNEL, API])
        no_device = GOLDEN["no_device"]
        self.assertEqual(
            db.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall(), [(RANK, no_device)]
        )
        self.assertEqual(
            db.execute("SELECT id, name FROM NPU_INFO").fetchall(), [(no_device, GOLDEN["npu_name"])]
        )

    def test_calc_hash_id_is_msmonitors(self):
        for text, expected in GOLDEN["calc_hash_id"]:
            self.assertEqual(calc_hash_id(text), expected, text)


class InterningTest(DbTest):
    # Every column that holds a STRING_IDS id, per table.
    STRING_COLUMNS = {
        "CANN_API": ["name"],
        "TASK": ["taskType"],
        "COMPUTE_TASK_INFO": [*[c for c, _ in GOLDEN["tables"]["COMPUTE_TASK_INFO"]][4:], "name"],
        "COMMUNICATION_OP": ["opName", "groupName", "algType", "opType"],
        "MSTX_EVENTS": ["message", "domainId"],
    }

    def test_ids_count_from_zero_each_text_once_and_every_reference_resolves(self):
        db = self.written([*EVERY_KIND, KERNEL, API])
        ids = [row[0] for row in db.execute("SELECT id FROM STRING_IDS ORDER BY id")]
        self.assertEqual(ids, list(range(len(ids))))
        values = [row[0] for row in db.execute("SELECT value FROM STRING_IDS")]
        self.assertEqual(len(values), len(set(values)))
        for table, columns in self.STRING_COLUMNS.items():
            for column in columns:
                dangling = db.execute(
                    f"SELECT count(*) FROM {table} WHERE {column} NOT IN (SELECT id FROM STRING_IDS)"
                ).fetchone()[0]
                self.assertEqual(dangling, 0, f"{table}.{column}")

    def test_a_second_batch_reuses_the_ids_of_the_first(self):
        writer = SqliteWriter(self.dir, PID, RANK)
        writer.write([KERNEL])
        writer.write([KERNEL, API])
        writer.close()
        with contextlib.closing(sqlite3.connect(writer.path)) as db:
            names = db.execute("SELECT DISTINCT name FROM COMPUTE_TASK_INFO").fetchall()
            self.assertEqual(len(names), 1)
            self.assertEqual(
                db.execute("SELECT count(*) FROM STRING_IDS WHERE value = 'matmul'").fetchone(), (1,)
            )


class RowsTest(DbTest):
    def setUp(self):
        super().setUp()
        self.db = self.written(EVERY_KIND)
        self.sid = {value: i for i, value in self.db.execute("SELECT id, value FROM STRING_IDS")}
        self.na = self.sid[GOLDEN["unknown_text"]]

    def rows(self, sql):
        return self.db.execute(sql).fetchall()

    def test_a_kernel_is_a_task_and_its_compute_info(self):
        s = self.sid
        tasks = self.rows("SELECT * FROM TASK WHERE connectionId IN (7, 8) ORDER BY globalTaskId")
        self.assertEqual(
            tasks,
            [
                (10, 20, 1, 7, 0, PID, s["KERNEL_AIVEC"], U, 3, U, U),
                (21, 25, GOLDEN["no_device"], 8, 1, PID, s["cpu_op_self"], U, U, U, U),  # host: no stream
            ],
        )
        info = self.rows("SELECT * FROM COMPUTE_TASK_INFO ORDER BY globalTaskId")
        na = self.na
        self.assertEqual(info[0], (s["matmul"], 0, U, U, s["KERNEL_AIVEC"], *[na] * 10))
        self.assertEqual([row[:2] for row in info], [(s["matmul"], 0), (s["aten::addmm"], 1)])

    def test_api_calls_carry_their_level_and_thread(self):
        levels = GOLDEN["api_levels"]
        rows = self.rows(
            "SELECT startNs, endNs, type, globalTid, connectionId, name FROM CANN_API ORDER BY connectionId"
        )
        s = self.sid
        self.assertEqual(
            rows,
            [
                (11, 12, levels["API"], 100 << 32 | 101, 8, s["aclnnAdd"]),
                (11, 13, levels["AclAPI"], 100 << 32 | 102, 9, s["aclrtSynchronizeStream"]),
                (12, 13, levels["RuntimeAPI"], 100 << 32 | 101, 10, s["rtKernelLaunch"]),
            ],
        )

    def test_communication_ops_are_named_per_group_and_unknowns_are_msmonitors(self):
        s = self.sid
        rows = self.rows("SELECT * FROM COMMUNICATION_OP ORDER BY opId")
        group = str(calc_hash_id("g0"))[-3:]
        fp16 = dict((name, i) for i, name in GOLDEN["enums"]["ENUM_HCCL_DATA_TYPE"])["FP16"]
        self.assertEqual(
            rows[0],
            (
                s[f"hcom_allReduce__{group}_0_1"],
                13,
                14,
                9,
                s["g0"],
                0,
                0,
                0,
                fp16,
                s["RING"],
                1024,
                s["hcom_allReduce_"],
                1,
            ),
        )
        invalid = GOLDEN["enums"]["ENUM_HCCL_DATA_TYPE"][-1][0]
        na_group = str(calc_hash_id(GOLDEN["unknown_text"]))[-3:]
        self.assertEqual(
            rows[1],
            (
                s[f"c10d::allreduce__{na_group}_0_1"],
                30,
                40,
                12,
                self.na,
                1,
                0,
                0,
                invalid,
                self.na,
                U,
                s["c10d::allreduce_"],
                GOLDEN["no_device"],
            ),
        )

    def test_markers_are_mstx_events_and_device_ranges_tasks(self):
        s, offset = self.sid, GOLDEN["mstx_connection_offset"]
        events = self.rows("SELECT * FROM MSTX_EVENTS ORDER BY connectionId")
        tid = 100 << 32 | 101
        self.assertEqual(
            events,
            [
                (15, 16, 2, U, U, s["fwd"], tid, tid, s["train"], offset + 5),
                (17, 17, 0, U, U, s["tick"], tid, tid, s["train"], offset + 6),
                (18, 19, 2, U, U, s["handoff"], tid, 100 << 32 | 103, s["default"], offset + 7),
            ],
        )
        device = self.rows(f"SELECT * FROM TASK WHERE taskType = {s[GOLDEN['mstx_task_type']]}")
        self.assertEqual(len(device), 1)
        start, end, dev, connection, task_id, pid, _type, context, stream, task, model = device[0]
        self.assertEqual(
            (start, end, dev, connection, pid, context, stream, task, model),
            (15, 16, 1, offset + 5, PID, U, 7, U, U),
        )
        self.assertEqual(self.rows(f"SELECT * FROM COMPUTE_TASK_INFO WHERE globalTaskId = {task_id}"), [])


class HostIsDeviceTest(DbTest):
    def test_a_host_range_is_also_the_cpus_device_range(self):
        writer = SqliteWriter(self.dir, PID, RANK, backend="torch", host_is_device=True)
        writer.write([RANGE, INSTANT, HOST_KERNEL])
        writer.close()
        mstx = GOLDEN["mstx_task_type"]
        with contextlib.closing(sqlite3.connect(writer.path)) as db:
            tasks = db.execute(
                "SELECT t.startNs, t.endNs, t.deviceId, t.connectionId, t.streamId FROM TASK t"
                " JOIN STRING_IDS s ON s.id = t.taskType WHERE s.value = ?",
                (mstx,),
            ).fetchall()
            offset = GOLDEN["mstx_connection_offset"]
            self.assertEqual(tasks, [(15, 16, GOLDEN["no_device"], offset + 5, U)])  # ranges only
            self.assertEqual(
                db.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall(), [(RANK, -1)]
            )
        self.assertEqual(order(db_reader.read(writer.path).records), order([RANGE, INSTANT, HOST_KERNEL]))


class ReadBackTest(DbTest):
    def test_a_record_of_each_kind_comes_back_as_written(self):
        self.written(EVERY_KIND)
        read = db_reader.read(self.path)
        self.assertEqual((read.layout, read.backend), ("msmonitor", "mspti"))
        self.assertEqual(order(read.records), order(EVERY_KIND))

    def test_what_msmonitors_layout_does_not_keep(self):
        node = Record(Kind.NODE_API, 1, 2, HOST, 0, 3, "node", "", HostExtras(1, 2))
        torch_api = Record(Kind.API, 1, 2, HOST, 0, 4, "aten::linear", "cpu_op", HostExtras(1, 2))
        self.written([node, torch_api])
        self.assertEqual(
            order(db_reader.read(self.path).records),
            order([node._replace(kind=Kind.API), torch_api._replace(type="")]),
        )


# This plugin's layout before issue 26, as its writer made it (META_DATA schema_version "1").
LEGACY_TABLES = {
    "KERNEL": "start_ns, end_ns, device_id, stream_id, correlation_id, name_id, type_id",
    "API": "start_ns, end_ns, process_id, thread_id, correlation_id, name_id",
    "COMMUNICATION": (
        "start_ns, end_ns, device_id, stream_id, correlation_id, name_id, count, data_type_id, comm_name_id,"
        " alg_type_id"
    ),
    "MARKER": (
        "start_ns, end_ns, device_id, stream_id, process_id, thread_id, marker_id, flag, source_id,"
        " domain_id, name_id"
    ),
    "MEMCPY": "start_ns, end_ns, device_id, stream_id, correlation_id, name_id, bytes, is_async",
    "HCCL": "start_ns, end_ns, device_id, stream_id, name_id, comm_name_id, bandwidth_gbps",
    "MEMORY": "start_ns, end_ns, device_id, stream_id, correlation_id, name_id, bytes, address",
}
LEGACY_ROWS = {
    "KERNEL": [(10, 20, 1, 3, 7, 1, 2)],
    "API": [(11, 12, 100, 101, 8, 3)],
    "COMMUNICATION": [(13, 14, 1, 5, 9, 4, 1024, 5, 6, 7)],
    "MARKER": [(15, 16, -1, 0, 100, 101, 5, 2, 8, 9, 10)],
    "MEMCPY": [(17, 18, 1, 6, 9, 11, 8192, 1)],
    "HCCL": [(17, 18, 1, 4, 12, 6, 12.5)],
    "MEMORY": [(19, 20, 1, 0, 11, 13, 4096, 0xDEAD)],
}
LEGACY_STRINGS = [
    "matmul",
    "KERNEL_AIVEC",
    "aclnnAdd",
    "allreduce",
    "FP16",
    "g0",
    "RING",
    "Host",
    "train",
    "fwd",
    "HTOD",
    "hcclKernel",
    "DEVICE",
]
LEGACY_RECORDS = [
    KERNEL,
    API,
    Record(
        Kind.COMMUNICATION, 13, 14, 1, 5, 9, "allreduce", "", CommunicationExtras(1024, "FP16", "g0", "RING")
    ),
    RANGE,
    MEMCPY,
    HCCL,
    MEMORY,
]


class LegacyTest(DbTest):
    def legacy_file(self, name="msmonitor_77_20260101000000000_2.db"):
        path = os.path.join(self.dir, name)
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE)")
            db.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", enumerate(LEGACY_STRINGS, start=1))
            db.execute("CREATE TABLE META_DATA (name TEXT PRIMARY KEY, value TEXT)")
            meta = {"schema_version": "1", "pid": "77", "rank": "2", "backend": "mspti"}
            db.executemany("INSERT INTO META_DATA VALUES (?, ?)", meta.items())
            for table, columns in LEGACY_TABLES.items():
                db.execute(f"CREATE TABLE {table} ({columns})")
                marks = ",".join("?" * len(columns.split(",")))
                db.executemany(f"INSERT INTO {table} VALUES ({marks})", LEGACY_ROWS[table])
            db.commit()
        return path

    def test_an_earlier_file_is_read(self):
        read = db_reader.read(self.legacy_file())
        self.assertEqual(read.layout, "legacy")
        self.assertEqual(order(read.records), order(LEGACY_RECORDS))

    def test_upgrade_rewrites_it_in_msmonitors_layout_under_its_name(self):
        old = self.legacy_file()
        into = os.path.join(self.dir, "new")
        new = os.path.join(into, os.path.basename(old))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            self.assertEqual(db_reader.main(["upgrade", old, "--into", into]), 0)
        self.assertEqual(printed.getvalue(), new + "\n")
        read = db_reader.read(new)
        self.assertEqual(read.layout, "msmonitor")
        stream_kept = [r if r.kind != Kind.COMMUNICATION else r._replace(stream=0) for r in LEGACY_RECORDS]
        self.assertEqual(order(read.records), order(stream_kept))
        with contextlib.closing(sqlite3.connect(new)) as db:
            self.assertEqual(db.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall(), [(2, 1)])
        with self.assertRaisesRegex(DbFileError, "exists; not replaced"):
            db_reader.upgrade(old, into)
        with self.assertRaisesRegex(DbFileError, "already in msMonitor's layout"):
            db_reader.upgrade(new, self.dir)

    def test_other_files_are_refused_with_what_they_are(self):
        empty = os.path.join(self.dir, "empty.db")
        sqlite3.connect(empty).close()
        with self.assertRaisesRegex(DbFileError, re.escape("not an npu-monitor database")):
            db_reader.read(empty)
        text = Path(self.dir, "notes.db")
        text.write_text("not a database " * 100)
        with self.assertRaisesRegex(DbFileError, "not an SQLite database"):
            db_reader.read(str(text))
        with self.assertRaisesRegex(DbFileError, "no such file"):
            db_reader.read(os.path.join(self.dir, "missing.db"))


if __name__ == "__main__":
    unittest.main()
