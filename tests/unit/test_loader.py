"""The strict loader: finite numbers, unique keys, and where a refusal is."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopkit import loader


@pytest.mark.parametrize(
    ("text", "path", "line", "message"),
    [
        ('{"a": 1, "b": {"c": [1, 2, NaN]}}', "$.b.c[2]", 1, "NaN"),
        ('{"a":\n  -Infinity}', "$.a", 2, "-Infinity"),
        ("[1, [2, Infinity]]", "$[1][1]", 1, "Infinity"),
        ('{"x": 1e400}', "$.x", 1, "too large"),
        ('{"x": -1e400}', "$.x", 1, "too large"),
        ('{"x": ' + "9" * 5000 + "}", "$.x", 1, "5000 digits"),
        ('{"a": 1,\n"b": {"c": 1, "c": 2}}', "$.b.c", 2, "duplicate key 'c'"),
        ('[{"k": 1}, {"k": 1, "k": 1}]', "$[1].k", 1, "duplicate key 'k'"),
    ],
)
def test_json_refusals_name_the_line_and_the_path(
    text: str, path: str, line: int, message: str
) -> None:
    with pytest.raises(loader.LoadError) as e:
        loader.json_loads(text)
    assert e.value.path == path
    assert e.value.line == line
    assert message in str(e.value)
    assert f"at line {line} column" in str(e.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "not JSON"), ("[" * 100_000, "nested too deeply"), (b"\xff", "not UTF-8")],
)
def test_json_that_does_not_parse(text: str | bytes, message: str) -> None:
    with pytest.raises(loader.LoadError, match=message) as e:
        loader.json_loads(text)
    assert e.value.path is None


def test_json_strings_that_merely_say_nan_are_strings() -> None:
    text = '{"a": "NaN", "b": "1e400", "NaN": [{"k": 1}, {"k": 1}]}'
    assert loader.json_loads(text) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "path", "line"),
    [
        ("a: 1\nb:\n  c: .nan\n", "$.b.c", 3),
        ("x: [1, .inf]\n", "$.x[1]", 1),
        ("x: -.Inf\n", "$.x", 1),
        ("x: 1.0e+400\n", "$.x", 1),
        ("a: 1\nb: 2\na: 3\n", "$.a", 3),
        ("x:\n  - y: 1\n    y: 2\n", "$.x[0].y", 3),
        ("a: 1\n'a': 2\n", "$.a", 2),
    ],
)
def test_yaml_refusals_name_the_line_and_the_path(text: str, path: str, line: int) -> None:
    with pytest.raises(loader.LoadError) as e:
        loader.yaml_load(text)
    assert (e.value.path, e.value.line) == (path, line)


def test_yaml_aliases_merges_and_plain_text() -> None:
    text = "base: &b {t: 1}\nd:\n  <<: *b\n  t: 2\ne: *b\nf: .nan is text\ng: 'NaN'\n"
    assert loader.yaml_load(text) == {
        "base": {"t": 1},
        "d": {"t": 2},
        "e": {"t": 1},
        "f": ".nan is text",
        "g": "NaN",
    }


@pytest.mark.parametrize(
    "text", ["a: [\n", "[" * 5000 + "]" * 5000, "a: !!python/name:os.system x\n"]
)
def test_yaml_that_does_not_load(text: str) -> None:
    with pytest.raises(loader.LoadError, match="not YAML"):
        loader.yaml_load(text)


def test_stream_lines_refuse_non_finite_numbers() -> None:
    assert loader.scan_line('{"cost": 1.5}', 0) == ({"cost": 1.5}, 13)
    for bad in ('{"cost": NaN}', '{"cost": 1e999}'):
        with pytest.raises(ValueError):
            loader.scan_line(bad, 0)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_strict_json_reads_what_strict_json_writes(value: Any) -> None:
    text = json.dumps(value, allow_nan=False)
    assert loader.json_loads(text) == value


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_float_is_read_back_exactly_when_it_is_finite(x: float) -> None:
    text = json.dumps({"x": x})
    if math.isfinite(x):
        assert loader.json_loads(text) == {"x": x}
    else:
        with pytest.raises(loader.LoadError):
            loader.json_loads(text)
