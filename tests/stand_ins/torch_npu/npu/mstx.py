"""STAND-IN for ``torch_npu.npu.mstx``: range markers (recorded by the device profiler there)."""

import itertools
from typing import Any, Optional

_ids = itertools.count(1)


def range_start(message: str, stream: Optional[Any] = None) -> int:
    return next(_ids)


def range_end(range_id: int) -> None:
    return None
