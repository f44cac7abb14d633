"""Acting when the program imports a module, without importing it ourselves."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Callable, Collection, Optional, Sequence


def after_import(names: Collection[str], action: Callable[[ModuleType], None]) -> None:
    """Run *action* once, right after the first of *names* the program imports has finished importing."""
    sys.meta_path.insert(0, _AfterImport(frozenset(names), action))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Leaves ``sys.meta_path`` at the first of its names, and wraps that module's loader."""

    def __init__(self, names: frozenset, action: Callable[[ModuleType], None]) -> None:
        self._names = names
        self._action = action

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in self._names or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the finders after this one
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module
        action = self._action

        def exec_then_act(module: ModuleType) -> None:
            original_exec(module)
            # The module is complete, but importlib marks it so only once this returns: what *action*
            # starts (a registration naming the framework) must already see it as imported.
            module_spec = getattr(module, "__spec__", None)
            if module_spec is not None:
                module_spec._initializing = False
            action(module)

        loader.exec_module = exec_then_act  # type: ignore[method-assign]
        return spec
