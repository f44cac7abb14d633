"""A daemon setting declared together with its command-line flag (:func:`flag`), and the value types
the flags take (argparse types: each refuses a bad value with the reason)."""

from __future__ import annotations

import argparse
import math
from dataclasses import field
from typing import Any, Callable, List, Sequence

from msmonitor_contract.vocabulary import split_list


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def at_least(minimum: float, convert: Callable[[str], Any], meaning: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < minimum:
            raise argparse.ArgumentTypeError(f"must be {meaning}, got {text}")
        return value

    return parse


unlimited_or_rate = at_least(0, float, "a number >= 0 (0: unlimited)")
unlimited_or_count = at_least(0, int, "a whole number >= 0 (0: unlimited)")
count = at_least(1, int, "a whole number >= 1")


def tcp_port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port in 0..65535 (0: any free port), got {text}")
    return value


def uid_list(text: str) -> List[int]:
    try:
        return [int(u) for u in split_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numeric uids, got {text!r}") from None


def flag(default: Any, help: str, names: Sequence[str] = (), **argparse_options: Any) -> Any:
    """A setting and its command-line flag, declared together: the field's default is the flag's.

    *names* replace the spellings made from the field name (``--flag-name`` and ``--flag_name``);
    *argparse_options* go to ``add_argument`` (``type``, ``choices``, ``metavar``, ``action``).
    """
    spec = {"help": help, "names": tuple(names), **argparse_options}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"flag": spec})
    return field(default=default, metadata={"flag": spec})
