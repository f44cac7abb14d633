"""The rules a command must satisfy, checked by `dyno` before sending and by the daemon on receipt.

Each rule names the request field (its path in the request, as ``targets.pids``); :func:`flag_name`
turns it into the CLI flag for messages, from the table dyno declares its flags with
(``msmonitor_contract.vocabulary.FLAG_NAMES``).
Values end up in ``KEY=VALUE`` config text that torch_npu splits on ``=`` and newlines, so no value
may contain either.

A rule reads a request by its field names only, so the daemon applies it to its own model of the
request (the same names, whichever wire it came by): proto presence and a model's ``None`` both
mean "not given" (:func:`_given`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Sequence

from google.protobuf.message import Message

from msmonitor_contract.vocabulary import DEFAULT_TOP_N, FLAG_NAMES, MAX_TOP_N

from . import dynolog_pb2 as pb

# A request message, or the daemon's model of it: the rules read the fields both have.
Request = Any

ACTIVITIES = ("CPU", "NPU")
PROFILER_LEVELS = ("Level_none", "Level0", "Level1", "Level2")
AIC_METRICS = (
    "AiCoreNone",
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "ResourceConflictRatio",
    "MemoryUB",
    "L2Cache",
    "MemoryAccess",
)
EXPORT_TYPES = ("Text", "Db")
HOST_SYS = ("cpu", "mem", "disk", "network", "osrt")
MAX_PATH = 4096
MAX_LIST_TEXT = 1024
# Targets: more pids than a node runs processes; ranks, as many (nputrace's config text carries them, in
# one datagram of 64 KiB). A set of them is built once per command, so matching costs no more for a
# long list.
MAX_PIDS = 4096
MAX_RANKS = 4096
# A step number, a count of steps, a roundup: beyond these a trace waits for ever or records without end
# (each step recorded is kept in the job's memory until the trace is written).
MAX_STEP = 1_000_000_000
MAX_ITERATIONS = 1000
MAX_DURATION_MS = 3_600_000  # a time-based trace: one hour
MAX_SESSION_S = 7 * 24 * 3600.0  # a `dyno dynamic` session's idle and launch timeouts: a week
# What a refusal shows of a value, or of a list: an answer must stay short whatever was sent (gRPC
# refuses error metadata beyond a few KiB, and the reason would be lost).
SHOWN_CHARACTERS = 200
SHOWN_VALUES = 8


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{flag_name(self.field)}: {self.message}"


def flag_name(field: str) -> str:
    """The dyno flag that sets request *field*: its name in FLAG_NAMES, else the field's own name (the
    last part of its path) with dashes."""
    return FLAG_NAMES.get(field, "--" + field.rpartition(".")[2].replace("_", "-"))


def npu_trace(request: Request) -> List[FieldError]:
    errors = targets(request.targets) + output_path("log_file", request.log_file)
    if not -1 <= request.start_step <= MAX_STEP:
        errors.append(
            FieldError(
                "start_step",
                f"must be -1 (the next step) or a step number in 0..{MAX_STEP}, got {request.start_step}",
            )
        )
    errors += _trigger(request.iterations, request.duration_ms, request.profile_start_time_ms)
    errors += _choices("activities", request.activities, ACTIVITIES, required=True)
    errors += _choice("profiler_level", request.profiler_level, PROFILER_LEVELS)
    errors += _choice("aic_metrics", request.aic_metrics, AIC_METRICS)
    errors += _choice("export_type", request.export_type, EXPORT_TYPES)
    errors += _choices("host_sys", request.host_sys, HOST_SYS)
    if request.async_mode and not request.analyse:
        errors.append(FieldError("async_mode", "needs --analyse (it runs the analysis in a subprocess)"))
    if _given(request, "gc_detect_threshold") and not 0 <= request.gc_detect_threshold < math.inf:
        errors.append(
            FieldError("gc_detect_threshold", f"must be finite, >= 0 ms, got {request.gc_detect_threshold}")
        )
    for name in ("mstx_domain_include", "mstx_domain_exclude"):
        errors += _names(name, getattr(request, name))
    return errors


def gpu_trace(request: Request) -> List[FieldError]:
    errors = targets(request.targets) + output_path("log_file", request.log_file)
    errors += _kineto_file("log_file", request.log_file)
    if request.iterations == 0:
        errors += _trigger(0, request.duration_ms, request.profile_start_time_ms)
    else:
        errors += _iterations(request.iterations, "or absent for a duration trace")
    if not 0 <= request.profile_start_iteration_roundup <= MAX_STEP:
        errors.append(
            FieldError(
                "profile_start_iteration_roundup",
                f"must be in 1..{MAX_STEP} (0: the default), got {request.profile_start_iteration_roundup}",
            )
        )
    if request.profile_memory and request.iterations > 0:
        errors.append(FieldError("profile_memory", "works with duration traces only, not with --iterations"))
    return errors


def watch_metrics(request: Request) -> List[FieldError]:
    """``dyno npu-monitor --watch``: its targets, bounded as a command's (a read-only client sends it)."""
    return targets(request.targets)


def fetch_monitor_files(request: Request) -> List[FieldError]:
    """``dyno npu-monitor --collect``: its targets, bounded as a command's."""
    return targets(request.targets)


MONITOR_KINDS = (
    "Marker",
    "Kernel",
    "API",
    "Hccl",
    "Memory",
    "MemSet",
    "MemCpy",
    "Communication",
    "AclAPI",
    "NodeAPI",
    "RuntimeAPI",
)
MONITOR_EXPORT_TYPES = ("DB", "Jsonl")


def npu_monitor(request: Request) -> List[FieldError]:
    errors = targets(request.targets)
    if request.start and request.stop:
        errors.append(FieldError("start", f"and {flag_name('stop')} exclude each other"))
    if not 0 <= request.duration_s < math.inf:
        errors.append(
            FieldError("duration_s", f"must be finite, >= 0 s (0: until stopped), got {request.duration_s}")
        )
    errors += _choices("activity_kinds", request.activity_kinds, MONITOR_KINDS)
    if request.export_type.lower() not in ("", "db", "jsonl"):
        errors.append(FieldError("export_type", f"must be DB or Jsonl, got {_quoted(request.export_type)}"))
    if request.log_file:
        errors += output_path("log_file", request.log_file)
    errors += _int_text(
        "jsonl_rotate_log_lines",
        request.jsonl_rotate_log_lines,
        lambda v: 100 <= v <= 500_000,
        "an integer in 100..500000",
    )
    errors += _int_text(
        "jsonl_rotate_log_files",
        request.jsonl_rotate_log_files,
        lambda v: v == -1 or v >= 2,
        "-1 (keep all) or an integer >= 2",
    )
    if len(request.filter) > MAX_LIST_TEXT:
        errors.append(FieldError("filter", f"is longer than {MAX_LIST_TEXT} characters"))
    else:
        errors += _config_safe("filter", request.filter)
    if not 0 <= request.top_n <= MAX_TOP_N:
        errors.append(
            FieldError(
                "top_n", f"must be in 0..{MAX_TOP_N} (0: the default {DEFAULT_TOP_N}), got {request.top_n}"
            )
        )
    if _given(request, "auto_trace"):
        errors += auto_trace(request)
    return errors


# --auto-trace's keys: (field, the key a user types, lowest, highest)
AUTO_TRACE_RANGES = (
    ("for_intervals", "for", 1, 100),
    ("iterations", "iterations", 1, 1000),
    ("max_per_day", "max", 1, 10_000),
)


def auto_trace(request: Request) -> List[FieldError]:
    """``--auto-trace``: with a start only; each key in its range, named as the user types it."""
    a = request.auto_trace
    errors = []
    if not request.start:
        errors.append(FieldError("auto_trace", f"goes with {flag_name('start')}"))
    if not 0 < a.slowdown <= 10:
        errors.append(
            FieldError("auto_trace", f"slowdown must be in 0..1000 % (above 0), got {a.slowdown:.0%}")
        )
    for name, key, low, high in AUTO_TRACE_RANGES:
        value = getattr(a, name)
        if not low <= value <= high:
            errors.append(FieldError("auto_trace", f"{key} must be in {low}..{high}, got {value}"))
    return errors


TASK_TIMES = ("l0", "l1", "l2", "on", "off")
DYNAMIC_EXPORT_TYPES = ("text", "db")


def dynamic_attach(attach: pb.DynamicAttach) -> List[FieldError]:
    """``dyno dynamic``: the processes, the output root, and the options every window records with."""
    errors = targets(attach.targets) + output_path("output", attach.output)
    if not attach.targets.pids:
        errors.append(FieldError("targets.pids", "is required: name the processes to attach to"))
    o = attach.options
    errors += _choices("options.activities", o.activities, ACTIVITIES, required=True)
    errors += _choice("options.task_time", o.task_time, TASK_TIMES)
    errors += _choice("options.aic_metrics", o.aic_metrics, AIC_METRICS)
    errors += _choices("options.host_sys", o.host_sys, HOST_SYS)
    errors += _choice("options.export_type", o.export_type, DYNAMIC_EXPORT_TYPES)
    for name, value in (
        ("idle_timeout_s", attach.idle_timeout_s),
        ("wait_registration_s", attach.wait_registration_s),
    ):
        if not 0 <= value <= MAX_SESSION_S:  # also refuses NaN and infinity
            errors.append(FieldError(name, f"must be in 0..{MAX_SESSION_S:g} seconds, got {value}"))
    return errors


def _given(request: Request, name: str) -> bool:
    if isinstance(request, Message):
        return bool(request.HasField(name))
    return getattr(request, name) is not None


def _int_text(field: str, text: str, ok: Callable[[int], bool], expected: str) -> List[FieldError]:
    # ASCII digits only: int() also takes surrounding whitespace, "1_000" and other scripts' digits,
    # which the process's reader refuses (and then the whole command with it).
    if not text or (re.fullmatch(r"-?[0-9]+", text) and ok(int(text))):
        return []
    return [FieldError(field, f"must be {expected}, got {_quoted(text)}")]


def targets(t: Request) -> List[FieldError]:
    errors = []
    if t.job_id < 0:
        errors.append(FieldError("targets.job_id", f"must be >= 0, got {t.job_id}"))
    errors += _numbers("targets.pids", t.pids, MAX_PIDS, 1, "pids must be positive")
    errors += _numbers("targets.ranks", t.ranks, MAX_RANKS, 0, "ranks must be >= 0")
    if t.process_limit < 0:
        errors.append(
            FieldError("targets.process_limit", f"must be >= 0 (0: no limit), got {t.process_limit}")
        )
    return errors


def _numbers(field: str, values: Sequence[int], most: int, lowest: int, rule: str) -> List[FieldError]:
    """At most *most* numbers, each >= *lowest*; the answer names the first bad one, never the list (a
    long one would not fit in the error's metadata)."""
    if len(values) > most:
        return [FieldError(field, f"lists {len(values)} numbers, more than {most}")]
    bad = next((i for i, value in enumerate(values) if value < lowest), None)
    if bad is None:
        return []
    return [FieldError(field, f"{rule}, got {values[bad]} (number {bad + 1} of {len(values)})")]


def _quoted(text: str) -> str:
    """*text* quoted for a message; a long one cut, saying how long it was."""
    if len(text) <= SHOWN_CHARACTERS:
        return repr(text)
    return f"{text[:SHOWN_CHARACTERS]!r}... ({len(text)} characters)"


def output_path(field: str, path: str) -> List[FieldError]:
    if not path:
        return [FieldError(field, "is required")]
    if not path.startswith("/"):
        return [FieldError(field, f"must be an absolute path on the traced node, got {_quoted(path)}")]
    if len(path) > MAX_PATH:
        return [FieldError(field, f"is longer than {MAX_PATH} characters")]
    # Kineto's reader cuts a line at '#' (a comment), so it would write where the part before points,
    # not where the whole path was checked against --trace-root; no reader needs '#' in a path.
    if "#" in path:
        return [
            FieldError(field, f"may not contain '#' (Kineto reads the rest as a comment): {_quoted(path)}")
        ]
    return _config_safe(field, path)


def _kineto_file(field: str, path: str) -> List[FieldError]:
    """Kineto inserts ``_<pid>`` before the first ``.json`` of its log file: in a folder's name that
    would be another folder than the one checked, so ``.json`` may appear in the file name only."""
    folder = path.rpartition("/")[0]
    if ".json" not in folder:
        return []
    why = "may have '.json' in its file name only (Kineto inserts the pid before the first one)"
    return [FieldError(field, f"{why}: {_quoted(path)}")]


def _iterations(iterations: int, otherwise: str) -> List[FieldError]:
    if 0 < iterations <= MAX_ITERATIONS:
        return []
    return [FieldError("iterations", f"must be in 1..{MAX_ITERATIONS} ({otherwise}), got {iterations}")]


def _trigger(iterations: int, duration_ms: int, start_time_ms: int) -> List[FieldError]:
    errors = _iterations(iterations, "or absent for a time-based trace") if iterations else []
    if iterations == 0 and not 0 < duration_ms <= MAX_DURATION_MS:
        errors.append(
            FieldError(
                "duration_ms",
                f"must be in 1..{MAX_DURATION_MS} ms when --iterations is not given (a time-based trace), "
                f"got {duration_ms}",
            )
        )
    if start_time_ms < 0:
        errors.append(
            FieldError("profile_start_time_ms", f"must be epoch milliseconds >= 0, got {start_time_ms}")
        )
    if start_time_ms and iterations > 0:
        errors.append(FieldError("profile_start_time_ms", "applies to time-based traces; drop --iterations"))
    return errors


def _choice(field: str, value: str, allowed: Iterable[str]) -> List[FieldError]:
    allowed = tuple(allowed)
    if value and value not in allowed:
        return [FieldError(field, f"must be one of {', '.join(allowed)}; got {_quoted(value)}")]
    return []


def _choices(
    field: str, values: Iterable[str], allowed: Iterable[str], required: bool = False
) -> List[FieldError]:
    values, allowed = list(values), tuple(allowed)
    if required and not values:
        return [FieldError(field, f"needs at least one of {', '.join(allowed)}")]
    bad = [v for v in values if v not in allowed]
    if bad:
        shown = ", ".join(v[:SHOWN_CHARACTERS] for v in bad[:SHOWN_VALUES])
        more = f" and {len(bad) - SHOWN_VALUES} more" if len(bad) > SHOWN_VALUES else ""
        return [FieldError(field, f"accepts {', '.join(allowed)}; got {shown}{more}")]
    return []


def _names(field: str, values: Iterable[str]) -> List[FieldError]:
    values = list(values)
    if len(",".join(values)) > MAX_LIST_TEXT:
        return [FieldError(field, f"is longer than {MAX_LIST_TEXT} characters")]
    errors = []
    for value in values:
        if not value or "," in value:
            errors.append(FieldError(field, f"has an empty or comma-containing name {_quoted(value)}"))
        elif value == "None":  # msMonitor's config text spells an empty list so: the name would vanish
            errors.append(FieldError(field, "may not name 'None', which the config text reads as no names"))
        errors += _config_safe(field, value)
    return errors


def _config_safe(field: str, value: str) -> List[FieldError]:
    # Readers split lines as str.splitlines does (form feed, U+2028, ... end a line too) and trim each
    # value: a value must survive both unchanged, or the process reads something else than was accepted.
    if "=" in value or len(value.splitlines()) > 1 or value != value.strip():
        return [
            FieldError(
                field,
                "may not contain '=' or a line break, nor begin or end with a space "
                f"(the config text is trimmed KEY=VALUE lines): {_quoted(value)}",
            )
        ]
    # A control character (NUL, backspace, ESC, ...) has no place in a path or a name, and a client
    # that does not escape its JSON (dynolog's and msMonitor's dyno) sends "\b" as one.
    if any(unicodedata.category(c) == "Cc" for c in value):
        return [FieldError(field, f"may not contain a control character: {_quoted(value)}")]
    return []
