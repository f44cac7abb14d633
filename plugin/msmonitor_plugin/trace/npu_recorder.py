"""torch_npu's recorder on Ascend: its profiler, its own output layout (``*_ascend_pt``) and analysis."""

from __future__ import annotations

import glob
import os
import socket
from typing import Any, List

from .. import kinds
from ..kinds.base import TraceSpec
from .recorder import Recorder, RecorderError, opened_folder


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
        self._into, _ = opened_folder(spec, self._root)
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
