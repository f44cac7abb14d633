"""Step counting for PyTorch, installed when (and only when) the process imports torch itself."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
from types import ModuleType
from typing import Any, Callable, Optional, Sequence

from .steps import StepCounter

log = logging.getLogger("msmonitor_plugin")


def install(counter: StepCounter, on_hooked: Callable[[], None]) -> None:
    """Hook optimizer steps now if torch is loaded, otherwise as soon as the program imports it.

    *on_hooked* runs once torch is hooked: the registration now has news (backend, versions).
    """
    if "torch" in sys.modules:
        _hook_optimizers(counter)
        on_hooked()
    else:
        sys.meta_path.insert(0, _TorchImportWatcher(counter, on_hooked))


def _hook_optimizers(counter: StepCounter) -> None:
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except ImportError:  # torch < 2.0 or a partial install: explicit step() still works
        log.warning("torch has no global optimizer step hook; call msmonitor_plugin.step() per step")
        return

    def on_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        counter.optimizer_stepped(optimizer)

    register_optimizer_step_post_hook(on_optimizer_step)


class _TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Waits for ``import torch`` to finish, hooks the optimizer, then leaves ``sys.meta_path``."""

    def __init__(self, counter: StepCounter, on_hooked: Callable[[], None]) -> None:
        self._counter = counter
        self._on_hooked = on_hooked

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the finders after this one
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module
        counter, on_hooked = self._counter, self._on_hooked

        def exec_then_hook(module: ModuleType) -> None:
            original_exec(module)
            _hook_optimizers(counter)
            on_hooked()

        loader.exec_module = exec_then_hook  # type: ignore[method-assign]
        return spec
