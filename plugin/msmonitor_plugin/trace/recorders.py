"""Profiler backends, chosen at run time: torch_npu's profiler on Ascend, else torch.profiler.

A recorder is started, stepped and stopped on the training thread (profilers are bound to it) and
writes its files afterwards, off that thread. Neither backend imports a framework the process has not
imported itself.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import socket
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from msmonitor_contract import configtext

from .. import identity, kinds
from ..identity import imported
from ..kinds import nputrace
from ..kinds.base import TraceSpec
from .analyse import analyse_file
from .output import OutputFolder, open_output


class RecorderError(RuntimeError):
    pass


class Recorder:
    """What both backends share: a torch-style profiler object, driven step by step."""

    backend = ""

    def __init__(self, spec: TraceSpec) -> None:
        self.spec = spec
        self.warnings: List[str] = []
        self._profile: Any = None
        self._into: Optional[OutputFolder] = None  # the trace's own folder, held open once made

    def add_file(self, name: str, text: str) -> str:
        """A file of the plugin's own (a window's info.json) beside the trace; its path."""
        assert self._into is not None  # made by write(), or at start
        return self._into.write_text(name, text)

    def close(self) -> None:
        into, self._into = self._into, None
        if into is not None:
            into.close()

    def _check_unmoved(self) -> None:
        """RecorderError when the trace's folder is no longer the one opened (see output.py)."""
        assert self._into is not None
        try:
            self._into.check_unmoved()
        except OSError as exc:
            raise unwritable(self._into.path, exc) from None

    def start(self, first_step: int) -> None:
        # The profiler names each step ProfilerStep#<step_num>: start it at the job's own number.
        self._profile.step_num = first_step
        self._profile.start()

    def step(self) -> None:
        self._profile.step()

    def stop(self) -> None:
        self._profile.stop()  # torch_npu's handler writes (and analyses) here; torch's writes in write()

    def write(self) -> List[str]:
        """Write the trace (and summary); returns the files. Runs off the training thread."""
        raise NotImplementedError

    @property
    def output(self) -> str:
        raise NotImplementedError

    def _unhonoured(self, names: List[str], why: str) -> None:
        """Name the msprof options this backend cannot record, never drop them silently."""
        self._name_unhonoured(
            [_flag(k, self.spec.msprof[k], "MSPROF_", "on") for k in sorted(self.spec.msprof) if k in names],
            why,
        )

    def _name_unhonoured(self, options: List[str], why: str) -> None:
        if options:
            self.warnings.append(f"not honoured ({why}): {', '.join(options)}")


def _flag(key: str, value: str, prefix: str, true: str) -> str:
    """A config key as the CLI spells it: ``MSPROF_TASK_TIME`` = ``l1`` → ``--task-time=l1``; switches
    that are set as ``=on`` (msprof) or ``=true``."""
    flag = "--" + key[len(prefix) :].lower().replace("_", "-")
    return f"{flag}={true if value == 'true' else value}"


# nputrace's keys torch.profiler has no use for: named when they differ from their defaults.
_NPU_ONLY = {
    key.name: key for key in nputrace.KEYS if key.name not in ("PROFILE_IS_RANK", "PROFILE_RANK_LIST")
}


def _npu_only(spec: TraceSpec) -> List[str]:
    """nputrace options given with a value other than the default, that torch.profiler cannot apply."""
    given = {k: v for k, v in spec.npu.items() if k in _NPU_ONLY}
    values = configtext.read(nputrace.KEYS, given)
    return [
        _flag(k, given[k], "PROFILE_", "true")
        for k in sorted(given)
        if values[k] != _NPU_ONLY[k].default and given[k] != "None"  # msMonitor's "None": not given
    ]


def output_folder(spec: TraceSpec) -> str:
    """The folder a trace writes into, as its kind says: the log-file folder, or the folder of gputrace's
    file."""
    return kinds.BY_COMMAND[spec.kind].folder(spec)


def unwritable(folder: str, exc: OSError) -> RecorderError:
    """The one wording of a trace that cannot be written: which folder, and the system's reason."""
    reason = "not a directory" if isinstance(exc, FileExistsError) else (exc.strerror or str(exc))
    return RecorderError(f"cannot write the trace into {folder}: {reason.lower()}")


def check_output(spec: TraceSpec, roots: Sequence[str] = ()) -> None:
    """Raise RecorderError when this process cannot write into the trace's folder, so that the trace
    fails when it is asked for rather than after recording: a read-only file system, a path under a
    regular file, a folder without permission, a link below the daemon's *roots* (its --trace-root).
    The folder is made if missing, as the write would, and kept open on the spec
    (:mod:`.output`): every later write goes through it."""
    folder = output_folder(spec)
    try:
        opened = open_output(folder, roots)
    except OSError as exc:
        raise unwritable(folder, exc) from None
    try:
        opened.probe()
    except OSError as exc:
        opened.close()
        raise unwritable(folder, exc) from None
    spec.folder = opened


def _opened(spec: TraceSpec, folder: str) -> Tuple[OutputFolder, bool]:
    """The trace's own *folder*, the checked one or one below it, opened through it (made if missing:
    whether it was made here); RecorderError if it cannot be."""
    assert spec.folder is not None  # opened by check_output when the trace was accepted
    try:
        return spec.folder.sub(os.path.relpath(folder, spec.folder.path))
    except OSError as exc:
        raise unwritable(folder, exc) from None


def recorder_for(spec: TraceSpec) -> Recorder:
    """torch_npu's profiler where the process imported torch_npu and the kind records there, else
    torch.profiler."""
    if imported("torch_npu") and kinds.BY_COMMAND[spec.kind].ascend_root is not None:
        return NpuRecorder(spec)
    if imported("torch"):
        return TorchRecorder(spec)
    raise RecorderError("this process has not imported torch (or torch_npu): there is no profiler to run")


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
        into, made = _opened(self.spec, self._dir)
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


class NpuRecorder(Recorder):
    """torch_npu's profiler on Ascend: its own output layout (``*_ascend_pt``) and analysis."""

    backend = "ascend_pt"

    def __init__(self, spec: TraceSpec) -> None:
        super().__init__(spec)
        import torch_npu

        npu_profiler: Any = torch_npu.profiler
        if "NPU" in spec.activities and not _device_set_up(torch_npu):
            raise RecorderError("device has not been set up: this process has not used an NPU yet")
        activities = [
            getattr(npu_profiler.ProfilerActivity, a) for a in spec.activities if a in ("CPU", "NPU")
        ]
        root = kinds.BY_COMMAND[spec.kind].ascend_root
        assert root is not None  # recorder_for checked
        self._root = root(spec)
        # torch_npu writes by the folder's name, resolved by itself: made here, following no link under
        # the daemon's roots, and checked to be the folder opened before and after it writes.
        self._into, _ = _opened(spec, self._root)
        self._check_unmoved()
        if spec.until_stopped:
            self._translate_msprof()
        self._profile = npu_profiler.profile(
            activities=activities,
            # A window records until stopped: no schedule, so the handler runs at stop().
            schedule=None
            if spec.until_stopped
            else npu_profiler.schedule(wait=0, warmup=0, active=max(spec.iterations, 1), repeat=1),
            on_trace_ready=npu_profiler.tensorboard_trace_handler(
                self._root,
                analyse_flag=spec.analyse,
                async_mode=spec.npu.get("PROFILE_ASYNC_MODE", "false") == "true",
            ),
            record_shapes=spec.record_shapes,
            profile_memory=spec.profile_memory,
            with_stack=spec.with_stack,
            with_flops=spec.with_flops,
            with_modules=spec.with_modules,
            experimental_config=self._experimental_config(npu_profiler),
        )

    def _experimental_config(self, npu_profiler: Any) -> Any:
        npu = self.spec.npu
        options = {
            "profiler_level": getattr(
                npu_profiler.ProfilerLevel, npu.get("PROFILE_PROFILER_LEVEL", "Level0"), None
            ),
            "aic_metrics": getattr(
                npu_profiler.AiCMetrics, npu.get("PROFILE_AIC_METRICS", "AiCoreNone"), None
            ),
            "l2_cache": npu.get("PROFILE_L2_CACHE") == "true",
            "op_attr": npu.get("PROFILE_OP_ATTR") == "true",
            "msprof_tx": npu.get("PROFILE_MSPROF_TX") == "true",
            "data_simplification": npu.get("PROFILE_DATA_SIMPLIFICATION", "true") == "true",
            "export_type": [npu.get("PROFILE_EXPORT_TYPE", "Text").lower()],
        }
        try:
            return npu_profiler._ExperimentalConfig(**{k: v for k, v in options.items() if v is not None})
        except TypeError as exc:  # an older torch_npu without some option
            self.warnings.append(f"torch_npu experimental config not applied in full: {exc}")
            return npu_profiler._ExperimentalConfig()

    def _translate_msprof(self) -> None:
        """msprof's options as torch_npu's experimental config keys; the rest are named as not honoured.

        torch_npu collects CANN API, HCCL and model execution data from Level1 on, so those switches are
        honoured by raising the level; AI CPU and on-chip memory sampling have no switch there.
        """
        msprof, npu = self.spec.msprof, self.spec.npu
        level = {"l0": "Level0", "l1": "Level1", "on": "Level1", "l2": "Level2"}.get(
            msprof.get("MSPROF_TASK_TIME", ""), "Level0"
        )
        if level == "Level0" and set(msprof) & _NEED_LEVEL1:
            level = "Level1"
        npu["PROFILE_PROFILER_LEVEL"] = level
        npu["PROFILE_AIC_METRICS"] = msprof.get("MSPROF_AIC_METRICS", "AiCoreNone")
        npu["PROFILE_L2_CACHE"] = msprof.get("MSPROF_L2", "false")
        npu["PROFILE_MSPROF_TX"] = msprof.get("MSPROF_MSPROFTX", "false")
        npu["PROFILE_EXPORT_TYPE"] = {"db": "Db"}.get(msprof.get("MSPROF_TYPE", ""), "Text")
        self._unhonoured(
            ["MSPROF_AICPU", "MSPROF_SYS_HARDWARE_MEM", "MSPROF_HOST_SYS"], "torch_npu has no switch"
        )

    @property
    def output(self) -> str:
        return self._root

    def write(self) -> List[str]:
        self._check_unmoved()
        assert self._into is not None
        pattern = os.path.join(self._into.reach(), f"{socket.gethostname()}_{os.getpid()}_*_ascend_pt")
        written = [os.path.basename(p) for p in sorted(glob.glob(pattern))[-1:]]
        for folder in written:
            self._into.seal(folder)
        return [os.path.join(self._root, folder) for folder in written]


_NEED_LEVEL1 = {"MSPROF_RUNTIME_API", "MSPROF_HCCL", "MSPROF_MODEL_EXECUTION", "MSPROF_ASCENDCL"}


def _device_set_up(torch_npu: Any) -> bool:
    """Whether the process has opened an NPU (msprof refuses to start before that, and says so)."""
    is_initialized = getattr(getattr(torch_npu, "npu", None), "is_initialized", None)
    return bool(is_initialized()) if callable(is_initialized) else True
