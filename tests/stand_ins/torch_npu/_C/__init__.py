"""STAND-IN for torch_npu's C extension: nothing the dynamic profiler calls lives here."""
