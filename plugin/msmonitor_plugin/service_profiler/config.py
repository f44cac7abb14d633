"""The MindIE service profiler's JSON switch file (``SERVICE_PROF_CONFIG_PATH``): its keys, read as
MindIE 26.0 reads them (lenient: a bad value is a warning and its default, never an exception), the
default file it creates (``prof_dir`` expanded: MindIE's reader does not expand ``$HOME``), and the
``"enable": 0`` it writes back when a limit stops recording (into the file a symlink points to, keeping
its mode and owner, as MindIE's in-place write does)."""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Tuple

from msmonitor_contract.files import replacing

log = logging.getLogger("msmonitor_plugin")

ENV = "SERVICE_PROF_CONFIG_PATH"
# MindIE's switch file is under 1 KiB: a larger one is not one, and is never read whole.
MAX_FILE_BYTES = 64 * 1024
_NOT_REGULAR = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}
_NOT_REGULAR.update({stat.S_IFDIR: "a folder", stat.S_IFSOCK: "a socket"})
DEFAULT_PROF_DIR = "$HOME/.ms_server_profiler/"
# What MindIE 26.0 writes for a missing file (prof_dir expanded when written: default_content), with
# metric_enable, its new key, off. profiler_step_num stays out: any value below 1 stops recording at once.
DEFAULT_CONTENT: Dict[str, Any] = {
    "enable": 0,
    "prof_dir": DEFAULT_PROF_DIR,
    "profiler_level": "INFO",
    "acl_task_time": 0,
    "acl_prof_task_time_level": "L0",
    "timelimit": 0,
    "domain": "",
    "metric_enable": 0,
}
# Keys that configure CANN's own profilers (aclprof, torch_npu's), which do not run here: said when
# operator collection (acl_task_time) is asked for with them.
CANN_ONLY = ("acl_prof_task_time_level", "aclprofAicoreMetrics", "aclDataTypeConfig")
LEVELS = {
    "ERROR": 10,
    "INFO": 20,
    "DETAILED": 30,
    "VERBOSE": 40,
    "L0": 10,
    "L1": 20,
    "L2": 30,
    "LEVEL_CORE_TRACE": 10,
    "LEVEL_OUTLIER_ENENT": 10,
    "LEVEL_NORMAL_TRACE": 20,
    "LEVEL_DETAILED_TRACE": 30,
}
MAX_TIMELIMIT_S = 7200
FREQ_RANGE = (1, 50)
ACL_TASK_TIME_MODES = {0: "off", 1: "aclprof", 2: "MSPTI", 3: "torch profiler"}


@dataclass(frozen=True)
class ServiceConfig:
    enable: bool = False
    prof_dir: str = ""  # with $HOME expanded and a trailing /
    profiler_level: int = 20
    acl_task_time: int = 0
    timelimit_s: int = 0  # 0: no limit
    domains: Optional[FrozenSet[str]] = None  # None: every domain
    api_filter: Tuple[str, ...] = ()
    kernel_filter: Tuple[str, ...] = ()
    host_system_usage_freq: int = 0  # Hz; 0: off
    npu_memory_usage_freq: int = 0
    torch_prof_stack: bool = False
    torch_prof_modules: bool = False
    torch_prof_step_num: int = 0  # 0: every step
    profiler_step_num: Optional[int] = None  # None: no step limit
    metric_enable: bool = False  # MindIE's Prometheus metrics: not collected here (a warning says so)
    warnings: Tuple[str, ...] = field(default=(), compare=False)
    # valid keys this plugin does not act on (CANN's profilers' settings, metric_enable): said at each start
    unused: Tuple[str, ...] = field(default=(), compare=False)

    def describe_changes(self, other: ServiceConfig) -> List[str]:
        """The fields that differ from *other* (``enable`` aside), for "takes effect at the next enable"."""
        return [
            name
            for name in self.__dataclass_fields__
            if name not in ("enable", "warnings", "unused") and getattr(self, name) != getattr(other, name)
        ]


def parse(obj: Any, env: Mapping[str, str] = os.environ) -> ServiceConfig:
    """The config as MindIE's Config.cpp reads it; every value it would refuse becomes a warning."""
    if not isinstance(obj, dict):
        raise ValueError("the file does not hold a JSON object")
    warnings: List[str] = []
    read = _Reader(obj, warnings)
    enable = read.integer("enable", 0) == 1
    acl_task_time = read.choice("acl_task_time", 0, tuple(ACL_TASK_TIME_MODES))
    metric_enable = read.flag("metric_enable")
    return ServiceConfig(
        enable=enable,
        prof_dir=_prof_dir(read.text("prof_dir", DEFAULT_PROF_DIR), env),
        profiler_level=read.level(),
        acl_task_time=acl_task_time,
        timelimit_s=read.timelimit(),
        domains=frozenset(_split(read.text("domain", ""))) or None,
        api_filter=tuple(_split(read.text("api_filter", ""))),
        kernel_filter=tuple(_split(read.text("kernel_filter", ""))),
        host_system_usage_freq=read.frequency("host_system_usage_freq"),
        npu_memory_usage_freq=read.frequency("npu_memory_usage_freq"),
        torch_prof_stack=read.flag("torch_prof_stack"),
        torch_prof_modules=read.flag("torch_prof_modules"),
        torch_prof_step_num=max(0, read.integer("torch_prof_step_num", 0)),
        profiler_step_num=read.integer("profiler_step_num", 0) if "profiler_step_num" in obj else None,
        metric_enable=metric_enable,
        warnings=tuple(warnings),
        unused=tuple(_unused(obj, acl_task_time, metric_enable)),
    )


def _unused(obj: Dict[str, Any], acl_task_time: int, metric_enable: bool) -> List[str]:
    """What the file asks for that is not done here, each as a sentence."""
    said = (
        ["metric_enable=1: MindIE's Prometheus metrics are not collected by this plugin"]
        if metric_enable
        else []
    )
    if acl_task_time:
        mode = f"{acl_task_time} ({ACL_TASK_TIME_MODES[acl_task_time]})"
        said += [
            f"{key}={json.dumps(obj[key])}: configures CANN's profilers, unused by acl_task_time {mode} here"
            for key in CANN_ONLY
            if key in obj
        ]
    return said


class _Reader:
    def __init__(self, obj: Dict[str, Any], warnings: List[str]) -> None:
        self._obj, self._warnings = obj, warnings

    def _warn(self, key: str, value: Any, meaning: str) -> None:
        self._warnings.append(f"{key}={json.dumps(value)}: {meaning}")

    def integer(self, key: str, default: int) -> int:
        value = self._obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self._warn(key, value, f"not an integer, taken as {default}")
            return default
        return value

    def text(self, key: str, default: str) -> str:
        value = self._obj.get(key, default)
        if not isinstance(value, str):
            self._warn(key, value, f"not a string, taken as {default!r}")
            return default
        return value

    def flag(self, key: str) -> bool:
        value = self._obj.get(key, False)
        if not isinstance(value, (bool, int)):
            self._warn(key, value, "not a boolean, taken as false")
            return False
        return bool(value)

    def choice(self, key: str, default: int, allowed: Tuple[int, ...]) -> int:
        value = self.integer(key, default)
        if value not in allowed:
            self._warn(key, value, f"not one of {', '.join(map(str, allowed))}, taken as {default}")
            return default
        return value

    def level(self) -> int:
        value = self._obj.get("profiler_level", "INFO")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and value.upper() in LEVELS:
            return LEVELS[value.upper()]
        self._warn("profiler_level", value, "not a level name or an integer >= 0, taken as INFO (20)")
        return LEVELS["INFO"]

    def timelimit(self) -> int:
        value = self.integer("timelimit", 0)
        if value > MAX_TIMELIMIT_S:
            self._warn("timelimit", value, f"above {MAX_TIMELIMIT_S} s, clamped to {MAX_TIMELIMIT_S}")
            return MAX_TIMELIMIT_S
        return max(0, value)

    def frequency(self, key: str) -> int:
        if key not in self._obj:
            return 0
        value = self.integer(key, -1)
        low, high = FREQ_RANGE
        if value == -1:
            return 0
        if not low <= value <= high:
            self._warn(key, value, f"not in {low}..{high} Hz (or -1), taken as off")
            return 0
        return value


def _split(text: str) -> List[str]:
    return [item.strip() for item in text.split(";") if item.strip()]


def _prof_dir(text: str, env: Mapping[str, str]) -> str:
    home = env.get("HOME") or os.path.expanduser("~")
    path = text.replace("$HOME", home).replace("${HOME}", home)
    return path if path.endswith("/") else path + "/"


def parse_text(text: str, env: Mapping[str, str] = os.environ) -> ServiceConfig:
    """The file's content as a config; raises ValueError (not JSON, not an object) naming the problem."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:  # deep nesting exhausts the decoder's recursion
        raise ValueError(f"not valid JSON ({exc})") from None
    return parse(obj, env)


def default_content(env: Mapping[str, str] = os.environ) -> Dict[str, Any]:
    """The default file's content, its prof_dir expanded for this user."""
    return {**DEFAULT_CONTENT, "prof_dir": _prof_dir(DEFAULT_PROF_DIR, env)}


def ensure(path: str, env: Mapping[str, str] = os.environ) -> bool:
    """Write MindIE's default file when *path* (ending in .json) is missing, never over one; True when the
    file exists afterwards. A missing folder is created (as ``mkdir -p``: 0777 less the umask), and the
    file as ``touch`` creates one (0666 less the umask: 0644 under the usual 022), so that whoever may
    write there can flip the switch. An existing folder must be ours and writable. When the file cannot
    be made, one line on stderr (the process is someone's service: it runs on) says where and why."""
    if os.path.exists(path):
        return True
    folder = os.path.dirname(os.path.abspath(path))
    if not path.endswith(".json"):
        return _not_created(path, "the name does not end in .json")
    try:
        os.makedirs(folder, exist_ok=True)
        owned = os.stat(folder).st_uid == os.getuid()
    except OSError as exc:
        return _not_created(path, f"cannot create its folder {folder}: {exc.strerror or exc}")
    if not owned or not os.access(folder, os.W_OK):
        return _not_created(path, f"its folder {folder} is not one of ours that we may write")
    try:
        _replace(path, default_content(env), exclusive=True)
    except FileExistsError:
        pass  # another process of the service created it first
    except OSError as exc:
        return _not_created(path, exc.strerror or str(exc))
    return True


def _not_created(path: str, why: str) -> bool:
    """Say it where the user looks (the plugin's log may be a file nobody opens); the job runs on."""
    line = (
        f"msmonitor_plugin: {ENV}={path}: not creating the switch file: {why}; "
        "service profiling is off until it exists"
    )
    log.warning("%s", line)
    print(line, file=sys.stderr, flush=True)
    return False


def read_text(path: str) -> str:
    """A small regular file's text: the switch file, its session record. The .pth hook reads the switch
    file while the interpreter starts, so this never blocks and never reads without bound: opened
    non-blocking (a FIFO without a writer would hang every Python start), anything but a regular file (a
    FIFO, a link to /dev/zero) refused, and so is a file over MAX_FILE_BYTES. Raises OSError saying why."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        kind = stat.S_IFMT(os.fstat(fd).st_mode)
        if kind != stat.S_IFREG:
            raise OSError(errno.EINVAL, f"not a regular file ({_NOT_REGULAR.get(kind, 'of another kind')})")
        data = b""
        while len(data) <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_FILE_BYTES // 1024} KiB, so not a switch file")
    return data.decode("utf-8", errors="replace")


def write_back_disabled(path: str) -> None:
    """``"enable": 0`` into the file, keeping every other key, atomically (a limit stopped recording);
    through a symlink into its target, with the target's mode and owner."""
    target = os.path.realpath(path)
    try:
        obj = json.loads(read_text(target))
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("%s: cannot write enable 0 back into %s: %s", ENV, path, exc)
        return
    obj["enable"] = 0
    try:
        _replace(target, obj, like=os.stat(target))
    except OSError as exc:
        log.warning("%s: cannot write enable 0 back into %s: %s", ENV, path, exc)


class _OwnerRefused(Exception):
    """The new file cannot be given the old one's owner."""


def _replace(
    path: str, obj: Dict[str, Any], exclusive: bool = False, like: Optional[os.stat_result] = None
) -> None:
    """Write *obj* to a temp file beside *path* and rename it over *path* (a reader never sees half a
    file); with *exclusive*, fail if *path* appeared meanwhile; with *like*, give it that file's mode and
    owner (when the owner cannot be given, write *path* in place instead, as MindIE does, so it keeps
    both)."""
    text = json.dumps(obj, indent=4) + "\n"
    mode = None if like is None else stat.S_IMODE(like.st_mode)
    try:
        with replacing(Path(path), mode=mode, exclusive=exclusive) as temp:
            temp.write_text(text, encoding="utf-8")
            if like is not None:
                _give_owner(temp, like)
    except _OwnerRefused:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def _give_owner(temp: Path, like: os.stat_result) -> None:
    """Give *temp* *like*'s owner; _OwnerRefused when it cannot be given."""
    own = temp.stat()
    if (own.st_uid, own.st_gid) == (like.st_uid, like.st_gid):
        return
    try:
        os.chown(temp, like.st_uid, like.st_gid)
    except PermissionError:
        raise _OwnerRefused from None
