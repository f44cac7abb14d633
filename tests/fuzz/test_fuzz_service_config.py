"""The service profiler's JSON switch: any text is a config or a ValueError, any JSON object a config
(bad values become warnings and defaults, as MindIE reads them), and valid values come back unchanged."""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest
from fuzz_strategies import json_values, scaled
from hypothesis import given
from hypothesis import strategies as st

from msmonitor_plugin.service_profiler import config

ENV = {"HOME": "/home/fuzz"}
KEYS = [
    *config.DEFAULT_CONTENT,
    "api_filter",
    "kernel_filter",
    "host_system_usage_freq",
    "npu_memory_usage_freq",
    "torch_prof_stack",
    "torch_prof_modules",
    "torch_prof_step_num",
    "profiler_step_num",
]
objects = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), json_values, max_size=8)


def _well_formed(cfg: config.ServiceConfig) -> None:
    assert isinstance(cfg.enable, bool)
    assert cfg.prof_dir.endswith("/") and "$HOME" not in cfg.prof_dir
    assert isinstance(cfg.profiler_level, int) and cfg.profiler_level >= 0
    assert cfg.acl_task_time in config.ACL_TASK_TIME_MODES
    assert 0 <= cfg.timelimit_s <= config.MAX_TIMELIMIT_S
    for freq in (cfg.host_system_usage_freq, cfg.npu_memory_usage_freq):
        assert freq == 0 or config.FREQ_RANGE[0] <= freq <= config.FREQ_RANGE[1]
    assert cfg.torch_prof_step_num >= 0
    assert cfg.domains is None or (cfg.domains and all(d == d.strip() and d for d in cfg.domains))
    assert all(isinstance(w, str) for w in cfg.warnings)


@scaled(120)
@given(st.text(max_size=60) | objects.map(json.dumps) | json_values.map(json.dumps))
def test_parse_text_gives_a_config_or_a_value_error(text: str) -> None:
    try:
        cfg = config.parse_text(text, ENV)
    except ValueError:
        return
    _well_formed(cfg)


@scaled(30)
@given(st.integers(1, 5000), st.sampled_from(["[", '{"a":']))
def test_deep_nesting_is_a_value_error(depth: int, opener: str) -> None:
    with pytest.raises(ValueError):
        config.parse_text(opener * depth, ENV)


@scaled(100)
@given(objects)
def test_any_object_is_a_config_with_warnings_for_what_was_refused(obj: Dict[str, Any]) -> None:
    _well_formed(config.parse(obj, ENV))


valid = st.fixed_dictionaries(
    {},
    optional={
        "enable": st.sampled_from([0, 1]),
        "prof_dir": st.text(max_size=20).map(lambda t: "/data/" + t + "/"),
        "profiler_level": st.sampled_from(sorted(config.LEVELS)) | st.integers(0, 100),
        "acl_task_time": st.sampled_from(sorted(config.ACL_TASK_TIME_MODES)),
        "acl_prof_task_time_level": st.sampled_from(["L0", "L1"]),
        "timelimit": st.integers(0, config.MAX_TIMELIMIT_S),
        "domain": st.lists(st.text("abcXYZ_", min_size=1, max_size=6), max_size=3).map(";".join),
        "host_system_usage_freq": st.integers(*config.FREQ_RANGE) | st.just(-1),
        "npu_memory_usage_freq": st.integers(*config.FREQ_RANGE) | st.just(-1),
        "torch_prof_stack": st.booleans(),
        "torch_prof_step_num": st.integers(0, 10**6),
        "profiler_step_num": st.integers(0, 10**6),
    },
)


@scaled(60)
@given(valid)
def test_valid_values_are_read_as_written(obj: Dict[str, Any]) -> None:
    cfg = config.parse_text(json.dumps(obj), ENV)
    assert cfg.warnings == ()
    assert cfg.enable == (obj.get("enable") == 1)
    assert cfg.prof_dir == obj.get("prof_dir", "/home/fuzz/.ms_server_profiler/")
    level = obj.get("profiler_level", "INFO")
    assert cfg.profiler_level == (config.LEVELS[level] if isinstance(level, str) else level)
    assert cfg.acl_task_time == obj.get("acl_task_time", 0)
    assert cfg.timelimit_s == obj.get("timelimit", 0)
    assert cfg.domains == (frozenset(obj["domain"].split(";")) if obj.get("domain") else None)
    assert cfg.host_system_usage_freq == max(0, obj.get("host_system_usage_freq", 0))
    assert cfg.torch_prof_stack == obj.get("torch_prof_stack", False)
    assert cfg.profiler_step_num == obj.get("profiler_step_num")
