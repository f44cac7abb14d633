"""``FetchMonitorFiles``: the files npu-monitor's ``--log-file`` mode wrote, for ``dyno npu-monitor
--collect``.

The daemon remembers each folder it sent a process as its monitor's ``--log-file`` (:class:`MonitorOutputs`,
kept after the monitor stopped and after the process exited: its files are complete only then). From
such a folder it serves only the files named for that process as msMonitor names them
(``msmonitor_<pid>_<time>_<rank>.db`` or ``.jsonl``), on :mod:`.fetch`'s terms: no symbolic link, a
regular file of the process's user, under ``--trace-root``. So neither the process nor anyone who can
write into the folder makes the daemon serve another file. Nothing of a process whose monitor has not
said it stopped is served: a database copied mid-write is not one. Operators only, as
``FetchTraceFiles``.
"""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

from msmonitor_contract.targets import Targets
from msmonitor_contract.vocabulary import MONITOR_FILE, MonitorState

from ..core import targeting
from ..core.registry import ProcessRecord
from .fetch import Entry, refusal

# Folders remembered, the oldest forgotten first: a node runs a few dozen processes at a time, and a
# collect comes soon after the job, so this is many jobs' worth yet bounded whatever the churn.
KEPT = 1024


@dataclass(frozen=True)
class MonitorOutput:
    """A folder this daemon sent one process as its monitor's --log-file (a :class:`.fetch.Owner`)."""

    record: ProcessRecord  # as the process registered: targets match it after the process left
    root: str

    @property
    def pid(self) -> int:
        return self.record.pid

    @property
    def host_pid(self) -> int:
        return self.record.host_pid

    @property
    def rank(self) -> int:
        return self.record.rank

    @property
    def uid(self) -> int:
        return self.record.uid

    def in_use(self, current: Optional[ProcessRecord]) -> bool:
        """Whether its monitor may still write here: the process is still registered (*current*, the
        record of its host pid now, is its own) and has not said its monitor stopped. Every folder of a
        running monitor counts: a start to a running monitor keeps the folder it had."""
        return current is self.record and current.monitor_state != MonitorState.IDLE

    def owns(self, name: str) -> bool:
        """Whether *name* is one of this process's files (its pid, and its rank when it has one)."""
        match = MONITOR_FILE.fullmatch(name)
        return match is not None and int(match[1]) == self.pid and self.rank in (-1, int(match[2]))


class MonitorOutputs:
    """Every folder sent as a monitor's --log-file, per process, the latest :data:`KEPT`."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._outputs: collections.OrderedDict[Tuple[int, str], MonitorOutput] = collections.OrderedDict()

    def remember(self, record: ProcessRecord, root: str) -> None:
        key = (record.host_pid, root)
        self._outputs.pop(key, None)
        self._outputs[key] = MonitorOutput(record, root)
        while len(self._outputs) > self._kept:
            self._outputs.popitem(last=False)

    def select(self, targets: Targets) -> List[MonitorOutput]:
        """The outputs of the processes *targets* select, in rank order (then pid, then folder)."""
        matched = [o for o in self._outputs.values() if targeting.matches(o.record, targets)]
        return sorted(matched, key=lambda o: (o.rank if o.rank >= 0 else 1 << 30, o.host_pid, o.root))


def entries(
    outputs: Sequence[MonitorOutput], writing: Callable[[MonitorOutput], bool], roots: Sequence[str]
) -> Iterator[Entry]:
    """Every file of *outputs*, each folder listed once (many ranks share one), a file served once; an
    output whose monitor is *writing* into it is one refusal instead."""
    listed: Dict[str, Listing] = {}
    served: Set[str] = set()
    for output in outputs:
        who = f"pid {output.pid} (rank {output.rank})"
        if writing(output):
            yield Entry(
                output,
                error=f"{who}: its monitor may still write to {output.root} (it has not said it stopped): "
                "stop it first, or --collect again once it has",
            )
            continue
        if output.root not in listed:
            listed[output.root] = _listing(output.root)
        names, why = listed[output.root]
        if why:
            yield Entry(output, error=f"{who}: {why}")
        for name in names:
            path = os.path.join(output.root, name)
            if output.owns(name) and path not in served:
                served.add(path)
                yield Entry(output, path, name, error=refusal(path, output, roots))


class Listing(NamedTuple):
    names: List[str]  # sorted, so a rank's rotated files come in order
    error: str = ""


def _listing(folder: str) -> Listing:
    try:
        return Listing(sorted(os.listdir(folder)))
    except OSError as exc:
        return Listing([], f"{folder} cannot be listed: {(exc.strerror or str(exc)).lower()}")
