"""Step counting for PyTorch, installed when (and only when) the process imports torch itself."""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable

from .imports import after_import
from .steps import StepCounter

log = logging.getLogger("msmonitor_plugin")


def install(counter: StepCounter, on_hooked: Callable[[], None]) -> None:
    """Hook optimizer steps now if torch is loaded, otherwise as soon as the program imports it.

    *on_hooked* runs once torch is hooked: the registration now has news (backend, versions).
    """

    def hook(_: object = None) -> None:
        _hook_optimizers(counter)
        on_hooked()

    if "torch" in sys.modules:
        hook()
    else:
        after_import(("torch",), hook)


def _hook_optimizers(counter: StepCounter) -> None:
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except ImportError:  # torch < 2.0 or a partial install: explicit step() still works
        log.warning("torch has no global optimizer step hook; call msmonitor_plugin.step() per step")
        return

    def on_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        counter.optimizer_stepped(optimizer)

    register_optimizer_step_post_hook(on_optimizer_step)
