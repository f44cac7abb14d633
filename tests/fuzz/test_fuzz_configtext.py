"""The KEY=VALUE codec reads any text into values or a ConfigTextError, and what it renders from
config-safe values reads back to the same values."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from fuzz_strategies import INT64, LINE_BREAKS, config_safe, scaled, tricky_text
from hypothesis import given
from hypothesis import strategies as st

from msmonitor_contract import configtext
from msmonitor_contract.configtext import BOOL, FLOAT, INT, LIST, OPTIONAL_TEXT, TEXT, Codec, ConfigTextError
from msmonitor_contract.kinds import DYNAMIC, GPUTRACE, NPUMONITOR, NPUTRACE

TABLES = {
    "nputrace": NPUTRACE.keys,
    "gputrace": GPUTRACE.keys,
    "npumonitor": NPUMONITOR.keys,
    "dynamic": DYNAMIC.keys,
}
lines = st.lists(
    st.tuples(tricky_text, st.sampled_from(["=", "", " = ", "=="]), tricky_text).map("".join)
    | st.sampled_from(["", "#", "# KEY=VALUE", "   "]),
    max_size=6,
)
config_texts = lines.flatmap(
    lambda ls: st.sampled_from(["\n", "\r\n", "\u2028"]).map(lambda sep: sep.join(ls))
)


@scaled(120)
@given(config_texts | st.text(max_size=80))
def test_parse_returns_trimmed_keys_and_values_or_raises_config_text_error(text: str) -> None:
    try:
        values = configtext.parse(text)
    except ConfigTextError as exc:
        assert "is not KEY=VALUE" in str(exc)
        return
    for key, value in values.items():
        assert key == key.strip() and value == value.strip()
        assert len(key.splitlines()) <= 1 and len(value.splitlines()) <= 1


@pytest.mark.parametrize("table", TABLES.values(), ids=list(TABLES))
@scaled(30)
@given(data=st.data())
def test_read_returns_every_key_typed_or_raises_config_text_error(table: configtext.Table, data: Any) -> None:
    names = st.sampled_from([k.name for k in table]) | st.text(max_size=6)
    raw = data.draw(st.dictionaries(names, tricky_text | st.integers().map(str) | st.floats().map(repr)))
    try:
        values = configtext.read(table, raw)
    except ConfigTextError as exc:
        assert any(str(exc).startswith(f"{k.name}=") for k in table), exc
        return
    assert set(values) == {k.name for k in table}


# --- round trip -------------------------------------------------------------------------------------

safe_text = st.text(max_size=30).map(config_safe).filter(bool)
list_items = safe_text.map(lambda t: config_safe(t.replace(",", ""))).filter(lambda t: t and t != "None")
VALUES: Dict[int, st.SearchStrategy[Any]] = {
    id(TEXT): safe_text,
    id(OPTIONAL_TEXT): safe_text | st.none(),
    id(BOOL): st.booleans(),
    id(INT): st.integers(*INT64),
    id(FLOAT): st.floats(allow_nan=False),
    id(LIST): st.lists(list_items, max_size=4),
}


def _expected(codec: Codec, value: Any) -> Any:
    if codec is OPTIONAL_TEXT and value is None:
        return "None"  # msMonitor's spelling of an unset option; its readers treat it as unset
    return value


@pytest.mark.parametrize("table", TABLES.values(), ids=list(TABLES))
@scaled(30)
@given(data=st.data())
def test_render_then_read_gives_the_values_back(table: configtext.Table, data: Any) -> None:
    chosen = data.draw(st.lists(st.sampled_from(table), unique_by=lambda k: k.name))
    values = {key.name: data.draw(VALUES[id(key.codec)]) for key in chosen}
    text = configtext.render(table, values)
    read = configtext.read(table, configtext.parse(text))
    for key in table:
        expected = _expected(key.codec, values[key.name]) if key.name in values else key.default
        assert read[key.name] == expected, key.name


@scaled(30)
@given(safe_text, st.sampled_from(list(LINE_BREAKS)), safe_text)
def test_a_line_break_of_any_kind_ends_a_line(before: str, brk: str, after: str) -> None:
    """A value never carries a line break: one that did would be two lines to torch_npu or to us."""
    text = f"A={before}{brk}B={after}"
    assert configtext.parse(text) == {"A": before, "B": after}
