"""Artifact folders: named by the attempt id, never outside the state folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit import schema
from loopkit.errors import BadInput
from loopkit.state import artifacts

UNSAFE = [
    "../../x",
    "..",
    "a/../../b",
    "a/b",
    "/etc",
    ".hidden",
    "-rf",
    "a..b",
    "x" * 129,
    "tab\there",
    " ",
    7,
]


@pytest.mark.parametrize("value", UNSAFE, ids=repr)
def test_an_unsafe_attempt_id_names_no_folder(value: object, tmp_path: Path) -> None:
    state = tmp_path / "repo" / ".loopkit"
    doc = {"kind": "loopkit/attempt", "version": 1, "attempt_id": value}
    with pytest.raises(BadInput, match=r"\$\.attempt_id") as e:
        artifacts.attempt_dir(state, artifacts.assign_attempt_id(doc))
    assert e.value.code == 3
    assert list(tmp_path.rglob("*")) == []  # not even the state folder was made
    assert schema.errors(doc, "attempt")  # and the published schema refuses it too


@pytest.mark.parametrize("value", ["20260101T000000Z-a1b2c3", "node-1.2_x", "A" * 128])
def test_a_plain_attempt_id_is_kept(value: str, tmp_path: Path) -> None:
    doc = {"kind": "loopkit/attempt", "version": 1, "attempt_id": value}
    assert artifacts.attempt_dir(tmp_path, artifacts.assign_attempt_id(doc)) == (
        tmp_path / "artifacts" / value
    )
    assert schema.errors(doc, "attempt") == []


def test_a_new_attempt_id_is_safe_and_stored() -> None:
    doc: dict[str, object] = {}
    made = artifacts.assign_attempt_id(doc)
    assert doc["attempt_id"] == made and artifacts.is_safe_id(made)


@pytest.mark.parametrize("value", UNSAFE[:5], ids=repr)
def test_attempt_dir_refuses_an_unsafe_id_given_directly(value: object, tmp_path: Path) -> None:
    with pytest.raises(BadInput):
        artifacts.attempt_dir(tmp_path, value)  # type: ignore[arg-type]
    assert list(tmp_path.rglob("*")) == []
