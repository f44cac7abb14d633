"""What a recording collects beside the API's rows: operators (``acl_task_time``) and host usage.

- ``2``: MSPTI through this plugin's MSPTI backend, API and kernel records into
  ``Trace_Service/ascend_service_profiler_<host>-<pid>.db``, kept by ``api_filter`` / ``kernel_filter``.
- ``3``: ``torch.profiler`` on every thread (``torch_prof_stack``, ``torch_prof_modules``; a
  ``torch_prof_step_num`` window of ``prof_step`` marks), its Chrome trace in the dated folder.
- ``host_system_usage_freq``: host CPU and memory usage from ``/proc``, as metrics of domain ``host``.

Each raises :class:`Unavailable` with the reason when it cannot run here; nothing is faked.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from typing import Any, Callable, List, Optional, Protocol, Sequence, Tuple

from msmonitor_contract import service_tables
from msmonitor_contract.activity import Kind

from ..identity import imported
from ..monitor.records import Record


class Unavailable(RuntimeError):
    pass


class Part(Protocol):
    """What a recording runs beside the API's rows; stopped when it ends."""

    def stop(self) -> None: ...


class MsptiOperators:
    def __init__(self, folder: str, api_filter: Sequence[str], kernel_filter: Sequence[str]) -> None:
        from ..monitor.aggregate import Aggregator
        from ..monitor.backends import Collector, MsptiBackend
        from ..monitor.mspti import MsptiError, load_library
        from ..monitor.writers import WriterThread

        try:
            self._backend = MsptiBackend(load_library())
        except MsptiError as exc:
            raise Unavailable(f"acl_task_time 2 (MSPTI): {exc}") from None
        self._writer = WriterThread(_OperatorDb(folder, api_filter, kernel_filter))
        try:
            unavailable = self._backend.start(
                Collector(Aggregator(), self._writer), frozenset({Kind.API, Kind.KERNEL})
            )
        except MsptiError as exc:
            self._writer.close()
            raise Unavailable(f"acl_task_time 2 (MSPTI): {exc}") from None
        self.warnings = [f"{kind.label}: {why}" for kind, why in unavailable.items()]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="msmonitor-service-mspti", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            wanted = self._backend.poll(time.monotonic())
            self._stop.wait(0.1 if wanted is None else max(0.0, min(0.1, wanted - time.monotonic())))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._backend.stop()
        self._writer.close()


class _OperatorDb:
    """MSPTI records as rows of :data:`.service_tables.OPERATOR_TABLES`; the writer thread calls it."""

    def __init__(self, folder: str, api_filter: Sequence[str], kernel_filter: Sequence[str]) -> None:
        self._filters = {Kind.API: tuple(api_filter), Kind.KERNEL: tuple(kernel_filter)}
        self._db = sqlite3.connect(
            os.path.join(folder, service_tables.db_name(service_tables.OPERATOR_PREFIX)),
            check_same_thread=False,
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        for table in service_tables.OPERATOR_TABLES:
            self._db.execute(table.create())

    def _keeps(self, record: Record) -> bool:
        wanted = self._filters.get(record.kind, ())
        return not wanted or any(part in record.name for part in wanted)

    def write(self, records: Sequence[Record]) -> None:
        kept = [r for r in records if self._keeps(r)]
        self._db.executemany(
            service_tables.API.insert(),
            [
                (r.name, r.start_ns, r.end_ns, _thread_of(r), r.correlation_id)
                for r in kept
                if r.kind is Kind.API
            ],
        )
        self._db.executemany(
            service_tables.KERNEL.insert(),
            [
                (r.name, r.type, r.start_ns, r.end_ns, r.device, r.stream, r.correlation_id)
                for r in kept
                if r.kind is Kind.KERNEL
            ],
        )

    def flush(self) -> None:
        self._db.commit()

    def close(self) -> None:
        self._db.commit()
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()


def _thread_of(record: Record) -> int:
    return int(getattr(record.extras, "thread_id", 0) or 0)


class TorchOperators:
    """``torch.profiler`` over the whole recording (or ``torch_prof_step_num`` steps of it)."""

    def __init__(self, folder: str, stack: bool, modules: bool, step_num: int) -> None:
        if imported("torch") is None:
            raise Unavailable("acl_task_time 3 (torch profiler): this process has not imported torch")
        from torch._C._profiler import _ExperimentalConfig
        from torch.profiler import ProfilerActivity, profile, schedule

        self._file = os.path.join(
            folder, f"torch_{socket.gethostname()}-{os.getpid()}_{time.time_ns()}.pt.trace.json"
        )
        self._steps = step_num
        self._profile: Any = profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=0, active=step_num, repeat=1) if step_num > 0 else None,
            with_stack=stack,
            with_modules=modules,
            # The switch flips on the watcher's thread; the service's work runs on its own threads.
            experimental_config=_ExperimentalConfig(profile_all_threads=True),
        )
        self._profile.start()

    def step(self) -> None:
        if self._steps > 0:
            self._profile.step()

    def stop(self) -> None:
        self._profile.stop()
        self._profile.export_chrome_trace(self._file)


class HostUsage:
    """Host CPU (percent of all CPUs) and memory used (percent), sampled *freq* times a second."""

    def __init__(self, freq: int, emit: Callable[[List[Tuple[str, float]]], None]) -> None:
        self._period = 1.0 / freq
        self._emit = emit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="msmonitor-service-host", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        previous = _cpu_times()
        while not self._stop.wait(self._period):
            now = _cpu_times()
            busy, total = now[0] - previous[0], now[1] - previous[1]
            previous = now
            self._emit([("cpuUsage", 100.0 * busy / total if total else 0.0), ("memUsage", _memory_used())])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def _cpu_times() -> Tuple[int, int]:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


def _memory_used() -> float:
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            info[key] = int(rest.split()[0])
    total = info.get("MemTotal", 0)
    return 100.0 * (total - info.get("MemAvailable", total)) / total if total else 0.0


def optional(build: Callable[[], Any], problems: List[str]) -> Optional[Any]:
    """*build()*, or None with the reason added to *problems*."""
    try:
        return build()
    except Unavailable as exc:
        problems.append(str(exc))
        return None
