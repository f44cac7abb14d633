"""``dynamic``: a ``dyno dynamic`` session, declared once. Its attach names the processes, where each
window goes and what it records; each window's start is config text of its own keys (nputrace's
options under their keys, msprof's under MSPROF_), a stop only its action. Both profilers write a window
into a ``PROF_`` folder of its own, as msprof names its windows. No C++ daemon has sessions."""

from __future__ import annotations

from typing import Any, Dict, List

from .. import configtext, rules
from .. import vocabulary as v
from ..configtext import TEXT as TEXT_KEY
from ..configtext import Key
from ..rules import FieldError
from ..schema import Field, Kind, Message, Usage
from ..targets import TARGETS
from ..values import FLOAT, INT, NAMES, ON_OFF, TEXT
from .nputrace import AIC_METRICS, HOST_SYS
from .tracing import (
    NPU_ACTIVITIES,
    PROFILE_MEMORY,
    RECORD_SHAPES,
    WITH_MODULES,
    WITH_STACK,
)

TASK_TIMES = ("l0", "l1", "l2", "on", "off")
EXPORT_TYPES = ("text", "db")
MAX_SESSION_S = 7 * 24 * 3600.0  # a session's idle and launch timeouts: a week
START, STOP = "start", "stop"
ACTION = Key("DYNAMIC_ACTION", TEXT_KEY, START)


def _msprof(name: str, help: str) -> Field:
    """One of msprof's on/off switches, under its MSPROF_ key."""
    return Field(name, ON_OFF, help, default="off", key="MSPROF_" + name.upper())


# What every window of a session records.
DYNAMIC_OPTIONS = Message(
    "DynamicOptions",
    (
        NPU_ACTIVITIES,
        RECORD_SHAPES,
        PROFILE_MEMORY,
        WITH_STACK,
        WITH_MODULES,
        Field(
            "task_time",
            TEXT,
            "task timing level: l0, l1, l2, on (= l1) or off",
            key="MSPROF_TASK_TIME",
            check=rules.one_of(TASK_TIMES),
        ),
        Field(
            "aic_metrics",
            TEXT,
            "AI Core metrics, e.g. PipeUtilization",
            key="MSPROF_AIC_METRICS",
            check=rules.one_of(AIC_METRICS),
        ),
        Field(
            "host_sys",
            NAMES,
            "host data: some of cpu,mem,disk,network,osrt",
            key="MSPROF_HOST_SYS",
            check=rules.some_of(HOST_SYS),
        ),
        Field(
            "export_type",
            TEXT,
            "export format: text or db",
            key="MSPROF_TYPE",
            flag="--type",
            check=rules.one_of(EXPORT_TYPES),
        ),
        _msprof("runtime_api", "Runtime API calls"),
        _msprof("aicpu", "AI CPU operators"),
        _msprof("model_execution", "model execution (GE) timing"),
        _msprof("hccl", "HCCL communication"),
        _msprof("msproftx", "msproftx / mstx markers"),
        _msprof("ascendcl", "AscendCL API calls"),
        _msprof("l2", "L2 cache hit rates"),
        _msprof("sys_hardware_mem", "on-chip memory bandwidth"),
    ),
)
# Who controls the processes: the client says who it is; under mutual TLS the daemon puts the
# certificate's name first. dyno fills it in itself.
DYNAMIC_CLIENT = Message(
    "DynamicClient",
    (
        Field("user", TEXT, option=False),
        Field("uid", INT, option=False),
        Field("hostname", TEXT, option=False),
        Field("pid", INT, option=False),
    ),
)
_SESSION_S = rules.within(0, MAX_SESSION_S, f"in 0..{MAX_SESSION_S:g} seconds")


def _pids_required(attach: Any) -> List[FieldError]:
    if attach.targets.pids:
        return []
    return [FieldError("targets.pids", "is required: name the processes to attach to")]


def _shape(attach: Any, values: Dict[str, Any]) -> Dict[str, Any]:
    return {ACTION.name: START, **values}


DYNAMIC = Kind(
    v.CommandKind.DYNAMIC,
    "Dynamic",
    Message(
        "DynamicAttach",
        (
            ACTION,
            Field("targets", TARGETS),
            # Where each window's PROF_ directory goes, on the job's node; dyno sets it (here, by default).
            Field("output", TEXT, key="DYNAMIC_OUTPUT", check=rules.output_path, option=False),
            Field("options", DYNAMIC_OPTIONS),
            Field(
                "idle_timeout_s",
                FLOAT,
                "seconds without a window before the session ends",
                default=v.DEFAULT_DYNAMIC_IDLE_TIMEOUT_S,
                flag="--idle-timeout",
                check=_SESSION_S,
            ),
            Field(
                "command_limit",
                INT,
                "start/stop commands before the session ends",
                default=v.DEFAULT_DYNAMIC_COMMAND_LIMIT,
            ),
            Field(
                "wait_registration_s",
                FLOAT,
                "launch mode: seconds the job has to register",
                default="60",
                flag="--launch-timeout",
                check=_SESSION_S,
                minimum=0,
            ),
            Field("client", DYNAMIC_CLIENT),
        ),
        checks=(_pids_required,),
    ),
    Usage(shape=_shape, output_field="output"),
)


def stop_text() -> str:
    """A window's stop: its action alone."""
    return configtext.render(DYNAMIC.keys, {ACTION.name: STOP})
