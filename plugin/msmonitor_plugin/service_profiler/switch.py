"""The service profiler's switch: the JSON file's ``enable`` turns recording on and off, with MindIE's
transitions.

- 0→1 reads every field again, then starts: the store, the operator collection (``acl_task_time``),
  host usage (in the master process only), and the limits.
- 1→0 stops and closes the files. Other fields edited while recording take effect at the next enable
  (logged).
- ``timelimit`` seconds or ``profiler_step_num`` steps stop recording by themselves and write
  ``"enable": 0`` back into the file.
- An unreadable or invalid file is one log line; the current state is kept.

Edits reach the switch as commands on the agent's router (kind ``service``), like the daemon's: the
watcher is one more command source, and operator collection takes the process's one profiler slot, so
it and npu-monitor or a ``dyno dynamic`` window exclude each other with the reason.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import List, Mapping, Optional

from msmonitor_contract import service_tables, wire
from msmonitor_contract.vocabulary import CommandKind

from ..slot import ProfilerSlot
from . import api, config, folder, operators
from .config import ServiceConfig
from .store import ServiceStore

log = logging.getLogger("msmonitor_plugin")

SLOT_OWNER = "the service profiler's operator collection (acl_task_time {mode})"


class ServiceSwitch:
    def __init__(self, path: str, env: Mapping[str, str], slot: ProfilerSlot) -> None:
        self.path = os.path.abspath(path)
        self._env = env
        self._slot = slot
        self._lock = threading.Lock()  # the watcher's thread and the limits' timers race
        self._config: Optional[ServiceConfig] = None  # what is recording now; None: off
        self._store: Optional[ServiceStore] = None
        self._parts: List[operators.Part] = []  # operator collection and host usage of this recording
        self._torch: Optional[operators.TorchOperators] = None
        self._since = 0.0
        self._steps = 0
        self._timer: Optional[threading.Timer] = None
        self._decision = folder.decide(self.path)
        self._generation = 0

    # --- the command source -----------------------------------------------------------------------

    def command(self) -> wire.Command:
        """The file as it is now, as a command for the router (the watcher calls this per edit)."""
        self._generation += 1
        try:
            text = config.read_text(self.path)
        except OSError as exc:
            text = ""
            log.warning("service profiler: cannot read %s (%s): state kept", self.path, exc.strerror)
        return wire.Command(
            kind=CommandKind.SERVICE_PROFILER.value, trace_id=str(self._generation), config=text
        )

    def handle(self, command: wire.Command) -> None:
        """Apply the file's content; never raises into the router."""
        if not command.config:
            return
        try:
            cfg = config.parse_text(command.config, self._env)
        except ValueError as exc:
            log.warning("service profiler: %s is %s: state kept", self.path, exc)
            return
        for warning in cfg.warnings:
            log.warning("service profiler: %s", warning)
        with self._lock:
            self._apply(cfg)

    def _apply(self, cfg: ServiceConfig) -> None:
        current = self._config
        if current is None and cfg.enable:
            self._start(cfg)
        elif current is not None and not cfg.enable:
            self._stop("enable 0")
        elif current is not None and current.describe_changes(cfg):
            log.info(
                "service profiler: %s changed while recording: takes effect at the next enable",
                ", ".join(current.describe_changes(cfg)),
            )

    # --- transitions ------------------------------------------------------------------------------

    def _start(self, cfg: ServiceConfig) -> None:
        dated = os.path.join(cfg.prof_dir, self._decision.folder)
        try:
            self._store = ServiceStore(os.path.join(dated, service_tables.TRACE_DIR))
        except Exception as exc:  # OSError, sqlite3.Error: the service never sees it
            log.warning("service profiler: cannot record into %s: %s; enable ignored", dated, exc)
            return
        self._config, self._since, self._steps = cfg, time.time(), 0
        self._parts = self._collectors(cfg, dated)
        api.attach(api.Recording(cfg.profiler_level, cfg.domains, self._store, self._step))
        if cfg.timelimit_s:
            self._timer = threading.Timer(
                cfg.timelimit_s, self._limit, args=(f"timelimit {cfg.timelimit_s} s",)
            )
            self._timer.daemon = True
            self._timer.start()
        if cfg.profiler_step_num is not None and cfg.profiler_step_num <= 0:
            self._stop(f"profiler_step_num {cfg.profiler_step_num}", write_back=True)
            return
        log.info("service profiler: recording into %s", dated)

    def _collectors(self, cfg: ServiceConfig, dated: str) -> List[operators.Part]:
        problems: List[str] = list(cfg.unused)
        parts: List[operators.Part] = []
        mode = cfg.acl_task_time
        if mode == 1:
            problems.append(
                "acl_task_time 1 (aclprof): not available here; use 2 (MSPTI) or 3 (torch profiler)"
            )
        elif mode in (2, 3):
            holder = self._slot.claim(SLOT_OWNER.format(mode=mode))
            if holder is not None:
                problems.append(f"acl_task_time {mode} refused: {holder} runs in this process")
            else:
                built = operators.optional(lambda: self._operators(cfg, dated), problems)
                if built is None:
                    self._slot.release(SLOT_OWNER.format(mode=mode))
                else:
                    parts.append(built)
        if cfg.npu_memory_usage_freq:
            problems.append("npu_memory_usage_freq: no NPU here")
        if cfg.host_system_usage_freq and self._decision.master:
            parts.append(operators.HostUsage(cfg.host_system_usage_freq, self._host_metrics))
        for problem in problems:
            log.warning("service profiler: %s", problem)
        return parts

    def _operators(self, cfg: ServiceConfig, dated: str) -> operators.Part:
        if cfg.acl_task_time == 2:
            return operators.MsptiOperators(
                os.path.join(dated, service_tables.TRACE_DIR), cfg.api_filter, cfg.kernel_filter
            )
        self._torch = operators.TorchOperators(
            dated, cfg.torch_prof_stack, cfg.torch_prof_modules, cfg.torch_prof_step_num
        )
        return self._torch

    def _stop(self, why: str, write_back: bool = False) -> None:
        cfg, store = self._config, self._store
        if cfg is None or store is None:
            return
        api.attach(None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for part in self._parts:
            try:
                part.stop()
            except Exception:
                log.exception("service profiler: stopping %s failed", type(part).__name__)
        if cfg.acl_task_time in (2, 3):
            self._slot.release(SLOT_OWNER.format(mode=cfg.acl_task_time))
        self._parts, self._torch, self._config, self._store = [], None, None, None
        store.close()
        if write_back:
            config.write_back_disabled(self.path)
        log.info("service profiler: stopped (%s); data in %s", why, os.path.dirname(store.path))

    def _limit(self, why: str) -> None:
        with self._lock:
            if self._config is not None:
                self._stop(why, write_back=True)

    def _step(self) -> None:
        """A step of the service: ``prof_step()`` (MindIE's ``SetProfilerCurrentStep``)."""
        self._steps += 1
        torch_ops = self._torch
        if torch_ops is not None:
            torch_ops.step()
        cfg = self._config
        if cfg is not None and cfg.profiler_step_num is not None and self._steps >= cfg.profiler_step_num:
            threading.Thread(
                target=self._limit, args=(f"profiler_step_num {cfg.profiler_step_num}",), daemon=True
            ).start()

    def _host_metrics(self, values: List[tuple]) -> None:
        """Host usage as counters (MindIE's ``counter`` table: one track per name, its value in args)."""
        store = self._store
        now = time.time_ns()
        for name, value in values:
            if store is not None:
                store.put(("counter", name, "host", now, {name: value}))

    # --- what the daemon is told ------------------------------------------------------------------

    def state(self) -> str:
        cfg, store = self._config, self._store
        if cfg is None or store is None:
            return "off"
        since = time.strftime("%H:%M:%S", time.localtime(self._since))
        return f"on since {since}, {os.path.dirname(os.path.dirname(store.path))}"

    def close(self) -> None:
        with self._lock:
            self._stop("the process exited")
