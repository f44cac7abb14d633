"""A command kind's fields as its config-text keys (the plugin's ``kinds.<kind>.FIELD_KEYS``, by which
the kind's text is written), read back: a command from a client that sends the text itself (dynolog's
and msMonitor's ``dyno`` over the legacy JSON RPC)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Type, TypeVar

from msmonitor_contract import configtext

from .model import Targets, from_fields

Command = TypeVar("Command")


@dataclass(frozen=True)
class FieldKeys:
    table: configtext.Table  # the kind's key table (msmonitor_plugin.kinds.<kind>.KEYS)
    pairs: configtext.FieldKeys  # (the command's field, its key)

    def read(self, text: str) -> Dict[str, Any]:
        """The fields *text* gives, typed by the key table; a key absent, empty or msMonitor's ``None``
        is not given, so the command's default stands. Raises ConfigTextError naming a bad value."""
        given = {k: v for k, v in configtext.parse(text).items() if v not in ("", "None")}
        typed = configtext.read(self.table, given)
        return {name: typed[key] for name, key in self.pairs if key in given}

    def command(
        self,
        model: Type[Command],
        text: str,
        targets: Targets,
        convert: Callable[[Dict[str, Any]], Dict[str, Any]] = lambda fields: fields,
    ) -> Command:
        """*text* as the kind's *model*, for *targets*; *convert* adjusts what the table cannot type."""
        command = from_fields(model, convert(self.read(text)))
        return dataclasses.replace(command, targets=targets)  # type: ignore[type-var]
