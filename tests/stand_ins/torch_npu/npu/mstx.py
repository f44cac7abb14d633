"""STAND-IN for ``torch_npu.npu.mstx``: range markers (recorded by the device profiler there)."""

import itertools

_ids = itertools.count(1)


def range_start(message, stream=None):
    return next(_ids)


def range_end(range_id):
    return None
