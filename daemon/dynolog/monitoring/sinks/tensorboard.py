"""TensorBoard event files under ``--metric_log_dir``, written with tensorboardX.

Layout: one run per device, ``device_<id>/``, and one per process for host-side data,
``device_host/rank_<rank>/`` (``pid<N>`` for a process without a rank): every process has host data
(API calls, host markers), and one run per process keeps their series apart while TensorBoard still
overlays them in one chart per tag. msMonitor meant host data to land in ``device_host`` but wrote it to
``device_18446744073709551615``; and it dropped Communication, AclAPI, NodeAPI and RuntimeAPI. Every
kind is written here.

Scalar tags, per kind: ``<Kind>/total_ns``, ``<Kind>/count``, ``<Kind>/mean_ns``, ``<Kind>/max_ns``; per top
name (at most ``top_n``): ``<Kind>/top/<name>/total_ns`` and ``…/mean_ns`` (markers:
``Marker/top/<domain>/<name>/…``); per process, in its host run: ``dropped/<reason>``, and
``sampled_fraction`` when the report observed only part of its interval (the torch backend's window).
Step: the report's sequence number; wall time: the end of its interval.
An incident of ``--auto-trace`` (docs/incidents.md) is marked at the step of the report that raised
it, in the run of its device: the scalar ``incident/<Kind>`` (how many times slower than the baseline)
and a text note ``incident/<Kind>/text_summary`` saying what was detected and done.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

from msmonitor_contract.activity import Kind
from msmonitor_contract.report import KindStat, Report

from ...core.paths import writable_folder
from . import Mark, ProcessLabels


def _import_tensorboardx() -> Any:
    """tensorboardX without torch: it imports torch (200 MB, a second) only to recognise tensors,
    which the daemon never passes; an absent module makes its optional import fail harmlessly."""
    blocked = "torch" not in sys.modules
    if blocked:
        sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        import tensorboardX
        from tensorboardX.proto import summary_pb2
        from tensorboardX.summary import text
    finally:
        if blocked:
            del sys.modules["torch"]
    return tensorboardX.FileWriter, summary_pb2, text


FileWriter, summary_pb2, text_summary = _import_tensorboardx()


def run_dir(process: ProcessLabels, device: int) -> str:
    return f"device_{device}" if device >= 0 else f"device_host/rank_{process.rank_label}"


def scalars(ks: KindStat, top_n: int) -> List[Tuple[str, float]]:
    """The (tag, value) pairs of one kind on one device."""
    label = ks.kind.label
    out = [
        (f"{label}/total_ns", float(ks.total_ns)),
        (f"{label}/count", float(ks.count)),
        (f"{label}/mean_ns", ks.mean_ns),
        (f"{label}/max_ns", float(ks.max_ns)),
    ]
    for name in ks.top[:top_n]:
        key = f"{name.domain}/{name.name}" if ks.kind == Kind.MARKER else name.name
        out.append((f"{label}/top/{key}/total_ns", float(name.total_ns)))
        out.append((f"{label}/top/{key}/mean_ns", name.mean_ns))
    return out


class TensorBoardSink:
    def __init__(self, log_dir: Path, top_n: int = 10, flush_secs: int = 10) -> None:
        writable_folder(log_dir)  # at start, with the reason: not at the first report, in the log
        self.log_dir = log_dir
        self.top_n = top_n
        self.flush_secs = flush_secs
        self._writers: Dict[Tuple[str, int], Any] = {}  # (run, pid) -> FileWriter
        self._lock = threading.Lock()

    def _writer(self, run: str, pid: int) -> Any:
        key = (run, pid)
        writer = self._writers.get(key)
        if writer is None:
            writer = FileWriter(
                logdir=str(self.log_dir / run), flush_secs=self.flush_secs, filename_suffix=f".pid{pid}"
            )
            self._writers[key] = writer
        return writer

    def emit(self, process: ProcessLabels, report: Report) -> None:
        # One event per run and report holding all its scalars: one add_scalar call per value costs
        # a queue round trip each (~6 ms a report with 96 values).
        runs: Dict[str, List[Tuple[str, float]]] = {}
        for ks in report.kinds:
            runs.setdefault(run_dir(process, ks.device), []).extend(scalars(ks, self.top_n))
        if report.dropped:
            host = runs.setdefault(run_dir(process, -1), [])
            host.extend((f"dropped/{reason}", float(n)) for reason, n in sorted(report.dropped.items()))
        if report.sampled_fraction < 1:
            runs.setdefault(run_dir(process, -1), []).append(("sampled_fraction", report.sampled_fraction))
        walltime = report.end_ns / 1e9
        with self._lock:
            for run, values in runs.items():
                summary = summary_pb2.Summary(
                    value=[summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in values]
                )
                self._writer(run, process.pid).add_summary(summary, report.seq, walltime)

    def mark(self, process: ProcessLabels, mark: Mark) -> None:
        """An incident at its report's step: a scalar (how many times slower) and a text note."""
        scalar = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=mark.tag, simple_value=mark.value)])
        with self._lock:
            writer = self._writer(run_dir(process, mark.device), process.pid)
            writer.add_summary(scalar, mark.step, mark.walltime)
            writer.add_summary(text_summary(mark.tag, mark.text), mark.step, mark.walltime)

    def flush(self) -> None:
        with self._lock:
            for writer in self._writers.values():
                writer.flush()

    def forget(self, process: ProcessLabels) -> None:
        with self._lock:
            for key in [k for k in self._writers if k[1] == process.pid]:
                self._writers.pop(key).close()

    def close(self) -> None:
        with self._lock:
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()
