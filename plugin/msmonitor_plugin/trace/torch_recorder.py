"""torch.profiler's recorder: CPU operators, plus CUDA kernels where a CUDA device is present; Kineto's
trace file, written through the trace's open folder."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from typing import Any, Dict, List, Mapping, Optional, Union

from msmonitor_contract import configtext

from .. import identity, kinds
from ..identity import imported
from ..kinds import nputrace
from ..kinds.base import TraceSpec
from .analyse import analyse_file
from .output import OutputFolder
from .recorder import Recorder, RecorderError, cli_flag, opened_folder, unwritable

# nputrace's keys torch.profiler has no use for: named when they differ from their defaults.
_NPU_ONLY = {
    key.name: key for key in nputrace.KEYS if key.name not in ("PROFILE_IS_RANK", "PROFILE_RANK_LIST")
}


def _npu_only(spec: TraceSpec) -> List[str]:
    """nputrace options given with a value other than the default, that torch.profiler cannot apply."""
    given = {k: v for k, v in spec.npu.items() if k in _NPU_ONLY}
    values = configtext.read(nputrace.KEYS, given)
    return [
        cli_flag(k, given[k], "PROFILE_", "true")
        for k in sorted(given)
        if values[k] != _NPU_ONLY[k].default and given[k] != "None"  # msMonitor's "None": not given
    ]


class TorchRecorder(Recorder):
    """torch.profiler: CPU operators, plus CUDA kernels where a CUDA device is present."""

    backend = "torch"

    def __init__(self, spec: TraceSpec) -> None:
        super().__init__(spec)
        import torch  # already imported by the process (recorder_for checked)
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] if "CPU" in spec.activities else []
        device_wanted = [a for a in spec.activities if a in ("NPU", "GPU", "CUDA")]
        if device_wanted and torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        elif device_wanted:
            self.warnings.append(
                f"{'/'.join(device_wanted)} activities unavailable: no torch_npu or CUDA device in this "
                "process; recorded CPU activities only"
            )
        if not activities:
            raise RecorderError(f"nothing to record: {','.join(spec.activities)} unavailable in this process")
        self._unhonoured(list(spec.msprof), "torch.profiler records no Ascend data; they need torch_npu")
        self._name_unhonoured(
            _npu_only(spec), "Ascend options of torch_npu's profiler; this is torch.profiler"
        )
        # A schedule that always records makes torch mark each step as ProfilerStep#<n>.
        self._profile = profile(
            activities=activities,
            schedule=lambda step: ProfilerAction.RECORD,
            record_shapes=spec.record_shapes,
            profile_memory=spec.profile_memory,
            with_stack=spec.with_stack,
            with_flops=spec.with_flops,
            with_modules=spec.with_modules,
            experimental_config=self._all_threads() if spec.until_stopped else None,
        )
        # Where the kind says: a folder per trace or window, or the one file stock Kineto would write.
        self._dir, self._file, self._output = kinds.BY_COMMAND[spec.kind].torch_output(
            spec, socket.gethostname(), os.getpid()
        )

    def _all_threads(self) -> Any:
        """A window may start between steps, on the plugin's thread (an inference server has no steps),
        and stop on another: only a profiler of every thread records the work and survives that."""
        from torch._C._profiler import _ExperimentalConfig

        try:
            return _ExperimentalConfig(profile_all_threads=True)
        except TypeError:  # an older torch: the thread that starts the window is the one recorded
            self.warnings.append("this torch profiles only the thread that started the window")
            return None

    def start(self, first_step: int) -> None:
        super().start(first_step)
        self._add_distributed_info()

    def _add_distributed_info(self) -> None:
        """Kineto's ``distributedInfo`` from the environment's rank, when torch.distributed cannot give
        it: tools that analyse a job's traces together (HolisticTraceAnalysis) tell the ranks apart by
        it alone. Where a process group is initialised, torch.profiler has added its own at start (with
        the backend and the groups): that one is kept, never doubled."""
        info = distributed_info(os.environ)
        if info is None or _process_group_initialised():
            return
        try:  # torch's own call for trace metadata: Kineto writes it at the top of the trace
            self._profile.add_metadata_json("distributedInfo", json.dumps(info))
        except (AttributeError, RuntimeError) as exc:  # an older torch, or a profiler that did not start
            self.warnings.append(f"the trace carries no distributedInfo (rank {info['rank']}): {exc}")

    @property
    def output(self) -> str:
        return self._output

    def write(self) -> List[str]:
        into, made = opened_folder(self.spec, self._dir)
        self._into = into
        name = os.path.basename(self._file)
        partial = name + ".tmp"
        try:
            # Through the open folder: a folder of its path swapped for a link since cannot move it.
            self._profile.export_chrome_trace(into.reach(partial))
            if not _exists(into, partial):  # Kineto logs a failed write and returns as if it had written
                raise RecorderError(f"cannot write the trace into {self._dir}: {_why_unwritten(into)}")
            os.replace(partial, name, src_dir_fd=into.fd, dst_dir_fd=into.fd)  # never seen half-written
        except BaseException as exc:
            # Give the space back and leave no half file, nor a folder made for nothing.
            for leftover in (partial, partial + ".tmp"):  # Kineto's own half file is the latter
                with contextlib.suppress(OSError):
                    os.unlink(leftover, dir_fd=into.fd)
            if made and self.spec.folder is not None:
                with contextlib.suppress(OSError):  # only when empty
                    os.rmdir(os.path.relpath(self._dir, self.spec.folder.path), dir_fd=self.spec.folder.fd)
            if isinstance(exc, OSError):
                raise unwritable(self._dir, exc) from exc
            raise
        written = [name]
        if self.spec.analyse:
            written += [os.path.basename(p) for p in analyse_file(into.reach(name), into.reach())]
        for file in written:
            into.seal(file)
        # Written through the open folder, so inside the root; but its name now leads elsewhere, and
        # the daemon and the user would read the trace by that name.
        self._check_unmoved()
        return [os.path.join(self._dir, file) for file in written]


def _exists(folder: OutputFolder, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder.fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def distributed_info(env: Mapping[str, str]) -> Optional[Dict[str, Union[str, int]]]:
    """``distributedInfo`` as torch.profiler writes it (backend, rank, world_size), from the launcher's
    environment (RANK / WORLD_SIZE, or Ascend's RANK_ID / RANK_SIZE); None when no rank is set. The
    backend is empty: without a process group there is none (torch names it from the group)."""
    rank = identity.rank(env)
    if rank < 0:
        return None
    info: Dict[str, Union[str, int]] = {"backend": "", "rank": rank}
    size = identity.world_size(env)
    if size > 0:
        info["world_size"] = size
    return info


def _process_group_initialised() -> bool:
    """Whether torch.distributed has a default process group (then torch writes distributedInfo)."""
    dist = imported("torch.distributed")
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def _why_unwritten(folder: OutputFolder) -> str:
    """Why a write into *folder* failed, when the writer did not say (Kineto only logs it)."""
    try:
        folder.probe()
        st = os.statvfs(folder.fd)
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    free = st.f_bavail * st.f_frsize
    if free < 1 << 20:
        return f"no space left on device ({free // 1024} KiB free in {folder.path})"
    return "the export failed (torch.profiler's own log says why)"
