"""One module per command kind: its :class:`~dynolog.core.pipeline.Policy`, and the model of its command.

A kind that ``dyno`` sends with an RPC of its own (its ``Policy.declaration``, which names the RPC) is
found here by the node and the gRPC edge alike: adding one is adding its module, nothing else in the
daemon.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, List, Type

from ..core.pipeline import Policy


def command_policies() -> List[Type[Policy[Any]]]:
    """Every policy served by an RPC of its own, from every module in this package."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return sorted(_subclasses(Policy), key=lambda cls: cls.rpc)


def _subclasses(cls: type) -> List[Type[Policy[Any]]]:
    found: List[Type[Policy[Any]]] = []
    sub: Type[Policy[Any]]
    for sub in cls.__subclasses__():
        if vars(sub).get("declaration") and sub not in found:
            found.append(sub)
        found += [s for s in _subclasses(sub) if s not in found]
    return found
