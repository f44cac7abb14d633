"""What every profiler backend's recorder shares: started, stepped and stopped on the training thread
(profilers are bound to it), it writes its files afterwards, off that thread, into the trace's folder
held open since the trace was accepted.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

from ..kinds.base import TraceSpec
from .output import OutputFolder


class RecorderError(RuntimeError):
    pass


class Recorder:
    """What both backends share: a torch-style profiler object, driven step by step."""

    backend = ""

    def __init__(self, spec: TraceSpec) -> None:
        self.spec = spec
        self.warnings: List[str] = []
        self._profile: Any = None
        self._into: Optional[OutputFolder] = None  # the trace's own folder, held open once made

    def add_file(self, name: str, text: str) -> str:
        """A file of the plugin's own (a window's info.json) beside the trace; its path."""
        assert self._into is not None  # made by write(), or at start
        return self._into.write_text(name, text)

    def close(self) -> None:
        into, self._into = self._into, None
        if into is not None:
            into.close()

    def _check_unmoved(self) -> None:
        """RecorderError when the trace's folder is no longer the one opened (see output.py)."""
        assert self._into is not None
        try:
            self._into.check_unmoved()
        except OSError as exc:
            raise unwritable(self._into.path, exc) from None

    def start(self, first_step: int) -> None:
        # The profiler names each step ProfilerStep#<step_num>: start it at the job's own number.
        self._profile.step_num = first_step
        self._profile.start()

    def step(self) -> None:
        self._profile.step()

    def stop(self) -> None:
        self._profile.stop()  # torch_npu's handler writes (and analyses) here; torch's writes in write()

    def write(self) -> List[str]:
        """Write the trace (and summary); returns the files. Runs off the training thread."""
        raise NotImplementedError

    @property
    def output(self) -> str:
        raise NotImplementedError

    def _unhonoured(self, names: List[str], why: str) -> None:
        """Name the msprof options this backend cannot record, never drop them silently."""
        self._name_unhonoured(
            [
                cli_flag(k, self.spec.msprof[k], "MSPROF_", "on")
                for k in sorted(self.spec.msprof)
                if k in names
            ],
            why,
        )

    def _name_unhonoured(self, options: List[str], why: str) -> None:
        if options:
            self.warnings.append(f"not honoured ({why}): {', '.join(options)}")


def cli_flag(key: str, value: str, prefix: str, true: str) -> str:
    """A config key as the CLI spells it: ``MSPROF_TASK_TIME`` = ``l1`` → ``--task-time=l1``; switches
    that are set as ``=on`` (msprof) or ``=true``."""
    flag = "--" + key[len(prefix) :].lower().replace("_", "-")
    return f"{flag}={true if value == 'true' else value}"


def unwritable(folder: str, exc: OSError) -> RecorderError:
    """The one wording of a trace that cannot be written: which folder, and the system's reason."""
    reason = "not a directory" if isinstance(exc, FileExistsError) else (exc.strerror or str(exc))
    return RecorderError(f"cannot write the trace into {folder}: {reason.lower()}")


def opened_folder(spec: TraceSpec, folder: str) -> Tuple[OutputFolder, bool]:
    """The trace's own *folder*, the checked one or one below it, opened through it (made if missing:
    whether it was made here); RecorderError if it cannot be."""
    assert spec.folder is not None  # opened by check_output when the trace was accepted
    try:
        return spec.folder.sub(os.path.relpath(folder, spec.folder.path))
    except OSError as exc:
        raise unwritable(folder, exc) from None
