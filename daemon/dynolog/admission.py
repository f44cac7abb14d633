"""What every edge checks before a command reaches the pipeline, whichever wire brought it: the kind's
rule in :mod:`dynoproto.validate` (the one ``dyno`` applies before sending: other clients exist) and
the output folder against ``--trace-root``."""

from __future__ import annotations

import re
from typing import Any, Callable, List, Sequence, Type

from dynoproto import validate

from .paths import check_output_path
from .pipeline import Policy


def refusals(policy: Type[Policy[Any]], command: Any, trace_roots: Sequence[str]) -> List[str]:
    """Why *command* (the kind's model) may not run, one message per problem; empty when it may. The
    output folder is held against the roots once the rule passed (its path may be refused already)."""
    rule: Callable[[Any], List[validate.FieldError]] = getattr(validate, _snake(policy.rpc))
    errors = [str(e) for e in rule(command)]
    return errors or outside_roots(getattr(command, policy.output_field), trace_roots)


def outside_roots(path: str, trace_roots: Sequence[str], flag: str = "--log-file") -> List[str]:
    outside = check_output_path(path, trace_roots, flag) if path else None
    return [outside] if outside else []


def _snake(name: str) -> str:
    """NpuTrace -> npu_trace: the rule of an RPC."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
