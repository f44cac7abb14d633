"""Who this process is: pid chain, job, rank, devices, framework — what registration tells the daemon."""

from __future__ import annotations

import os
import platform
import socket
import sys
from types import ModuleType
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

from msmonitor_contract import __version__
from msmonitor_contract.numbers import strict_int
from msmonitor_contract.pids import ancestors
from msmonitor_contract.vocabulary import split_list
from msmonitor_contract.wire import Hello

# Framework modules whose presence names the backend, most specific first.
_BACKENDS = (("torch_npu", "torch_npu"), ("mindspore", "mindspore"), ("torch", "torch"))
_DEVICE_ENV = ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def _env_int(env: Mapping[str, str], *names: str, default: int = -1) -> int:
    for name in names:
        number = strict_int(env.get(name, "").strip(), negative=True)
        if number is not None:
            return number
    return default


def rank(env: Mapping[str, str]) -> int:
    return _env_int(env, "RANK", "RANK_ID")


def world_size(env: Mapping[str, str]) -> int:
    return _env_int(env, "WORLD_SIZE", "RANK_SIZE")


def job_id(env: Mapping[str, str]) -> int:
    return _env_int(env, "MSMONITOR_JOB_ID", "SLURM_JOB_ID", default=0)


def devices(env: Mapping[str, str]) -> List[int]:
    """Visible accelerator ids; with several visible, the local rank's one when it is known."""
    for name in _DEVICE_ENV:
        ids = [i for i in map(strict_int, split_list(env.get(name))) if i is not None]
        if ids:
            local = _env_int(env, "LOCAL_RANK")
            return [ids[local]] if 0 <= local < len(ids) and len(ids) > 1 else ids
    return []


def imported(name: str) -> Optional[ModuleType]:
    """The module once its import has finished; None before, and while another thread still runs it.

    A module is in ``sys.modules`` from the moment its import begins: touching torch's submodules then,
    from the plugin's thread, deadlocks on the import lock of the thread that is importing it.
    """
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def import_in_progress() -> bool:
    """Whether some thread is importing a module right now."""
    return any(
        getattr(getattr(m, "__spec__", None), "_initializing", False) for m in list(sys.modules.values())
    )


def framework() -> Dict[str, str]:
    """Versions of the frameworks this process has imported (never imports one itself)."""
    found = {"python": platform.python_version()}
    for module_name, _ in _BACKENDS:
        module = imported(module_name)
        if module is not None:
            found[module_name] = str(getattr(module, "__version__", "unknown"))
    return found


def backend(versions: Mapping[str, str]) -> str:
    for module_name, name in _BACKENDS:
        if module_name in versions:
            return name
    return "python"


class States(NamedTuple):
    """What a process is doing, as its hello tells: the (id, phase) of the trace it holds, its monitor's
    state, its service switch's, and who holds its profiler slot ("" when free)."""

    trace: Tuple[str, str] = ("", "")
    monitor: str = ""
    service: str = ""
    profiler: str = ""


IDLE = States()


def hello(
    step: int, capabilities: List[str], env: Mapping[str, str] = os.environ, states: States = IDLE
) -> Hello:
    """This process's registration."""
    pid = os.getpid()
    versions = framework()
    return Hello(
        pid=pid,
        ancestors=ancestors(pid),
        job_id=job_id(env),
        rank=rank(env),
        local_rank=_env_int(env, "LOCAL_RANK"),
        world_size=world_size(env),
        devices=devices(env),
        backend=backend(versions),
        versions=versions,
        plugin_version=__version__,
        capabilities=list(capabilities),
        hostname=socket.gethostname(),
        step=step,
        trace_id=states.trace[0],
        trace_phase=states.trace[1],
        monitor_state=states.monitor,
        service=states.service,
        profiler=states.profiler,
    )
