"""STAND-IN for ``torch_npu._C._profiler``: the names the dynamic profiler's config parser imports."""

import enum
from typing import Any


class ProfilerActivity(enum.Enum):
    CPU = 0
    NPU = 1


class _ExperimentalConfig:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
