"""STAND-IN for ``torch_npu.profiler``'s root (the real one loads the C extension's profiler)."""
