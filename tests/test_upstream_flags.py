"""The flags of the C++ daemons this one replaces, as their sources define them
(tests/data/upstream_flags.tsv), are accepted in every spelling gflags takes, on the command line and in
flagfiles."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence

import pytest

from dynolog.config import IGNORED_UPSTREAM_FLAGS, ignored_flag_warning, parse_args
from harness import Daemon, read_line_until, stop_process

SOURCES = Path(__file__).parent / "data" / "upstream_flags.tsv"


@dataclass(frozen=True)
class Defined:
    origin: str  # which source, as the file's header names them
    name: str
    gflags_type: str


def defined() -> List[Defined]:
    rows = [line.split("\t") for line in SOURCES.read_text().splitlines() if not line.startswith("#")]
    return [Defined(origin, name, gflags_type) for origin, name, gflags_type, _default, _file in rows]


DEFINED = defined()
TYPES = {d.name: d.gflags_type for d in DEFINED}


@dataclass(frozen=True)
class Own:
    """An upstream flag this daemon implements: a value to give it, and the setting it lands in."""

    attribute: str
    given: str = ""  # "" for a boolean
    expected: Any = True


OWN = {
    "port": Own("port", "1779", 1779),
    "enable_ipc_monitor": Own("enable_ipc_monitor"),
    "use_JSON": Own("use_json"),
    "logtostderr": Own("logtostderr"),
    "certs_dir": Own("certs_dir", "/etc/dynolog/pki", "/etc/dynolog/pki"),
    "metric_log_dir": Own("metric_log_dir", "/var/lib/tb", Path("/var/lib/tb")),
    "prometheus_address": Own("prometheus_address", "0.0.0.0", "0.0.0.0"),
    "prometheus_port": Own("prometheus_port", "9464", 9464),
}
SAMPLE = {"int32": "7", "uint32": "7", "string": "/opt/upstream/value"}


def test_the_sources_are_all_read():
    origins = {d.origin for d in DEFINED}
    assert origins == {"dynolog-0.6.0", "dynolog-main", "msmonitor", "dynolog-udsrelay", "glog-0.7.1"}
    for d in DEFINED:  # one type per name, whichever daemon defines it
        assert d.gflags_type == TYPES[d.name], d


def test_every_defined_flag_is_ours_or_ignored_with_its_type():
    assert not set(OWN) & set(IGNORED_UPSTREAM_FLAGS)
    assert set(TYPES) == set(OWN) | set(IGNORED_UPSTREAM_FLAGS), "the table and the sources differ"
    ignored = {name: flag.gflags_type for name, flag in IGNORED_UPSTREAM_FLAGS.items()}
    assert ignored == {name: t for name, t in TYPES.items() if name not in OWN}
    assert {name for name, t in TYPES.items() if t == "bool"} >= {n for n in OWN if not OWN[n].given}


def gflags_spellings(name: str) -> Dict[str, List[List[str]]]:
    """Every way gflags takes *name*, by the value it means: "on", "off", or a value."""
    dashed = name.replace("_", "-")
    if TYPES[name] != "bool":
        value = OWN[name].given if name in OWN else SAMPLE[TYPES[name]]
        forms = [[f"{d}{n}={value}"] for d in ("--", "-") for n in (name, dashed)]
        return {"value": forms + [[f"{d}{name}", value] for d in ("--", "-")]}
    on = [
        [f"--{name}"],
        [f"-{name}"],
        [f"--{dashed}"],
        *([f"{d}{name}={v}"] for d in ("--", "-") for v in ("true", "1", "yes")),
    ]
    off = [
        [f"--no{name}"],
        [f"-no{name}"],
        [f"--no{dashed}"],
        *([f"{d}{name}={v}"] for d in ("--", "-") for v in ("false", "0", "no")),
    ]
    return {"on": on, "off": off}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_each_defined_flag_in_each_gflags_spelling(name: str):
    for meaning, forms in gflags_spellings(name).items():
        for argv in forms:
            config = parse_args(argv)
            if name in OWN:
                own = OWN[name]
                expected = False if meaning == "off" else own.expected
                assert getattr(config, own.attribute) == expected, argv
            else:
                assert config.ignored_flags == [name], argv


def test_every_defined_flag_in_nested_flagfiles_single_dashed(tmp_path: Path):
    inner, outer = tmp_path / "inner.gflags", tmp_path / "outer.gflags"
    inner.write_text("\n".join(single_dashed(name) for name in sorted(TYPES)) + "\n")
    outer.write_text(f"# the node's flags\n-flagfile={inner}\n")
    config = parse_args(["-flagfile", str(outer)])
    assert sorted(config.ignored_flags) == sorted(IGNORED_UPSTREAM_FLAGS)
    for own in OWN.values():
        assert getattr(config, own.attribute) == own.expected


def single_dashed(name: str) -> str:
    if TYPES[name] == "bool":
        return f"-{name}=true"
    return f"-{name}={OWN[name].given if name in OWN else SAMPLE[TYPES[name]]}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--no_such_flag"], "unrecognized arguments: --no_such_flag"),
        (["-no_such_flag=1"], "unrecognized arguments: -no_such_flag=1"),
        (["--enable_ipc"], "unrecognized arguments: --enable_ipc"),  # gflags takes whole names only
        (["--noport"], "unrecognized arguments: --noport"),  # not a boolean
        (["--dcgm_major_version=two"], "--dcgm_major_version: invalid int value: 'two'"),
        (["-use_ODS=maybe"], "expected true or false, got 'maybe'"),
        (["--dcgm_lib_path"], "--dcgm_lib_path: expected one argument"),
    ],
)
def test_unknown_and_mistyped_flags_are_refused_by_name(capsys, argv: List[str], message: str):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def test_flagfile_mistakes_are_named(tmp_path: Path):
    looped, prose = tmp_path / "looped.gflags", tmp_path / "prose.gflags"
    looped.write_text(f"--port=1\n--flagfile={looped}\n")
    prose.write_text("--port=1\ndynolog\n")
    for argv, message in [
        ([f"--flagfile={looped}"], f"--flagfile {looped} includes itself"),
        (["-flagfile", str(prose)], f"--flagfile {prose} line 2: 'dynolog' is not a flag"),
        (["-flagfile"], "-flagfile needs a file"),
    ]:
        with pytest.raises(SystemExit, match=message):
            parse_args(argv)


def test_the_daemon_warns_on_stderr_of_each_unused_flag_and_serves(tmp_path: Path):
    flagfile = tmp_path / "dynolog.gflags"
    flagfile.write_text(
        "-enable_ipc_monitor=true\n-dcgm_lib_path=/usr/lib/libdcgm.so.3\n-noenable_gpu_monitor\n"
    )
    daemon = Daemon(tmp_path, ["-flagfile", str(flagfile), "-use_ODS", "-v", "1"])
    stderr = started_and_stopped(daemon.command())
    expected = ["dcgm_lib_path", "enable_gpu_monitor", "use_ODS", "v"]
    warnings = [line for line in stderr if "is a flag of the C++ daemon" in line]
    assert sorted(warnings) == sorted(f"dynolog: {ignored_flag_warning(name)}" for name in expected)
    assert "training processes' own profilers" in ignored_flag_warning("dcgm_lib_path")
    log = daemon.log_file.read_text()
    assert all(ignored_flag_warning(name) in log for name in expected)


def started_and_stopped(command: Sequence[str]) -> List[str]:
    """Start the daemon, wait for its ready line, stop it: the lines it wrote on stderr."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        read_line_until(proc, "dynolog ready")
        proc.terminate()
        _, stderr = proc.communicate(timeout=10)
    finally:
        stop_process(proc)
    return stderr.splitlines()
