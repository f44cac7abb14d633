"""STAND-IN for ``torch_npu.npu``: the stream and the mstx markers ``dynamic_profile.step()`` uses."""

from . import mstx  # noqa: F401


def current_stream() -> None:
    return None
