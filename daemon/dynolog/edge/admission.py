"""What every edge checks before a command reaches the pipeline, whichever wire brought it: the checks
its kind's declaration derives (the ones ``dyno`` applies before sending: other clients exist), and the
output folder against ``--trace-root``."""

from __future__ import annotations

from typing import Any, List, Sequence

from msmonitor_contract.schema import Kind

from ..core.paths import check_output_path


def refusals(kind: Kind, command: Any, trace_roots: Sequence[str]) -> List[str]:
    """Why *command* (the kind's model) may not run, one message per problem; empty when it may. The
    output folder is held against the roots once the checks passed (its path may be refused already)."""
    errors = [str(e) for e in kind.check(command)]
    field = kind.output_field
    return errors or outside_roots(getattr(command, field), trace_roots, kind.flag(field))


def outside_roots(path: str, trace_roots: Sequence[str], flag: str = "--log-file") -> List[str]:
    outside = check_output_path(path, trace_roots, flag) if path else None
    return [outside] if outside else []
