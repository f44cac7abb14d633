"""profiler.db's line charts, as the analyser writes them for MindStudio Insight: the curve tables
(:mod:`..curves`: ``req_latency``, ``first_token_latency``, ``prefill_gen_speed``, ``decode_gen_speed``)
and the ``*_curve`` views Insight draws from those and from the ``batch``, ``kvcache`` and
``request_status`` tables, each with its description in ``translate`` (Insight's captions, keyed by view,
which lists the ``data_table`` views too). A curve table is written, and a view made, only where its table
has rows, as the analyser writes no empty frame."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, fields
from typing import Any, Callable, List, Sequence

from .. import curves
from ..analysis import SCHEDULE_NAMES
from ..model import Recording


@dataclass(frozen=True)
class CurveTable:
    table: str
    rows: Callable[[Recording], List[Any]]  # dataclasses of :mod:`..curves`, fields as columns


CURVE_TABLES = (
    CurveTable("req_latency", curves.req_latency_rows),
    CurveTable("first_token_latency", curves.first_token_rows),
    CurveTable("prefill_gen_speed", curves.prefill_speed_rows),
    CurveTable("decode_gen_speed", curves.decode_speed_rows),
)


@dataclass(frozen=True)
class Curve:
    view: str
    table: str
    select: str  # the view's query over its table
    caption: str


TIME = "substr(timestamp, 1, 19) || '.' || substr(timestamp, 21)"  # 'YYYY-MM-DD HH:MM:SS:ffffff', a dot


LABELS = {"min_value": "min"}  # a column shown under another name; the others under their own


def _figures(unit: str, scale: str, columns: Sequence[str], digits: int = 4) -> str:
    """The columns as REAL, scaled and rounded, named '<label>(<unit>)'; *digits* 0: not rounded."""

    def one(column: str) -> str:
        value = f"CAST({column} AS REAL){scale}"
        shown = f"round({value}, {digits})" if digits else value
        return f'{shown} AS "{LABELS.get(column, column)}({unit})"'

    return ", ".join(map(one, columns))


def _timed(view: str, table: str, figures: str, text: str) -> Curve:
    """A curve over time from a curve table (its timestamp)."""
    return Curve(view, table, f"SELECT {TIME} AS time, {figures} FROM {table} ORDER BY time", text)


def _per_batch(columns: str) -> str:
    names = ", ".join(f"'{n}'" for n in SCHEDULE_NAMES)
    return (f'SELECT ROW_NUMBER() OVER (ORDER BY start_datetime) - 1 AS batch_id, {columns} FROM batch '
            f"WHERE name IN ({names}) ORDER BY batch_id")  # fmt: skip


SPEED = ("avg", "p99", "p90", "p50")
FIRST_TOKEN = ("p99", "p90", "p50", "min_value")
CURVES = (
    _timed("Request_Latency_curve", "req_latency", _figures("ms", "/1000", SPEED),
           "End-to-end latency of the requests finished so far"),
    # milliseconds in the table already; not rounded, as the analyser shows them
    _timed("First_Token_Latency_curve", "first_token_latency", _figures("ms", "", FIRST_TOKEN, 0),
           "Time to first token of the requests arriving in each 100 ms"),
    _timed("Prefill_Generate_Speed_Latency_curve", "prefill_gen_speed", _figures("tokens/s", "", SPEED),
           "Prefill throughput (tokens/s) of the batches starting in each 100 ms"),
    _timed("Decode_Generate_Speed_Latency_curve", "decode_gen_speed", _figures("tokens/s", "", SPEED),
           "Decode throughput (tokens/s) of the iterations starting in each 100 ms"),
    Curve("Batch_Size_curve", "batch",
          _per_batch("batch_size AS total_batch_size, prefill_batch_size, decode_batch_size"),
          "Requests in each scheduled batch, prefill and decode"),
    Curve("Batch_Token_curve", "batch",
          _per_batch("total_scheduled_tokens, prefill_scheduled_tokens, decode_scheduled_tokens"),
          "Tokens scheduled in each batch: in all, for prefill, for decode"),
    Curve("Kvcache_Usage_Percent_curve", "kvcache",
          "SELECT start_datetime AS datetime, kvcache_usage_rate * 100 AS kvcache_usage_percent FROM kvcache "
          "ORDER BY datetime", "KV-cache usage (%) over time"),
    # The analyser's view reads status and "QueueSize=", which its table of scope#QueueName reports lacks, so
    # its view cannot be read; this one has its columns, from the table as it is.
    Curve("Request_Status_curve", "request_status",
          "SELECT " + TIME + " AS time, CAST(coalesce(WAITING, 0) AS REAL) AS waiting, 0.0 AS swapped, "
          "CAST(coalesce(RUNNING, 0) AS REAL) AS running FROM request_status ORDER BY time",
          "Queue sizes over time: waiting, swapped, running"),
)  # fmt: skip

TABLE_CAPTIONS = {  # the data_table views'
    "request_data": "Per request: time to first token, input and output tokens, latency",
    "batch_info": "Per batch: its scheduling and its execution",
    "kvcache_usage": "KV-cache blocks used during inference",
    "forward_info": "Per forward pass of the model: its duration and the gap to the next",
}


def create_translate(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE translate (key TEXT NOT NULL PRIMARY KEY, value_en TEXT, value_zh TEXT)")


def caption(db: sqlite3.Connection, view: str, text: str) -> None:
    # no Chinese wording of our own: the English caption in both languages
    db.execute("INSERT INTO translate (key, value_en, value_zh) VALUES (?, ?, ?)", (view, text, text))


def _has_rows(db: sqlite3.Connection, table: str) -> bool:
    return db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None


def write_curves(db: sqlite3.Connection, recording: Recording) -> None:
    """The curve tables with rows, then each view whose table has rows (the others are already written)."""
    for curve_table in CURVE_TABLES:
        rows = curve_table.rows(recording)
        if rows:
            header = [f.name for f in fields(rows[0])]
            db.execute(f"CREATE TABLE {curve_table.table} ({', '.join(header)})")
            db.executemany(
                f"INSERT INTO {curve_table.table} VALUES ({', '.join('?' * len(header))})",
                ([getattr(row, name) for name in header] for row in rows),
            )
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for curve in CURVES:
        if curve.table in tables and _has_rows(db, curve.table):
            db.execute(f"CREATE VIEW {curve.view} AS {curve.select}")
            caption(db, curve.view, curve.caption)
