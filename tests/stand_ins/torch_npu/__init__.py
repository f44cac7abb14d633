"""STAND-IN for torch_npu's package root and C extension (no Ascend device or CANN here).

Only what needs the device is stood in for: the package root (the real one loads ``torch_npu._C``),
``torch_npu._C``, ``torch_npu.npu`` (streams, mstx), the roots of ``torch_npu.profiler`` and
``torch_npu.utils``, and the device profiler itself (``profiler/profiler.py``). The dynamic profiler
that talks to the daemon -- ``profiler/_non_intrusive_profile.py``, ``profiler/dynamic_profile.py``,
``profiler/_dynamic_profiler/`` and the helpers they import -- is the published wheel's own Python,
unpacked beside these files by ``tests/peers.py``.

As the real import does (``_init/core/module_loader._initialize_profiler_if_needed``), importing the
package starts the non-intrusive dynamic profiler: with ``MSMONITOR_USE_DAEMON=1`` it forks the monitor
helper that polls the daemon, and steps on every optimizer step.
"""

import torch  # noqa: F401  (torch_npu imports torch first)

from . import _C  # noqa: F401
from ._C import _profiler  # noqa: F401
from .profiler._non_intrusive_profile import _NonIntrusiveProfile

_NonIntrusiveProfile.init()
