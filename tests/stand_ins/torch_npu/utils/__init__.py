"""STAND-IN for ``torch_npu.utils``'s root (the real one loads device code); its pure-Python modules
``_error_code``, ``_path_manager`` and ``utils`` are the wheel's."""
