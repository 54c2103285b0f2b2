"""lk-diff through click's CliRunner: the documents it prints and its exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopkit import schema
from loopkit.cli.diff import main
from tests.helpers.evidence import attempt, cli, write_contract


@pytest.fixture
def repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(git_repo)
    return git_repo


def _invoke(*args: str, stdin: str | None = None) -> tuple[int, dict[str, Any] | None, str]:
    return cli(main, *args, stdin=stdin)


def test_alone_prints_the_diff_section(repo: Path) -> None:
    contract = write_contract(repo, writable=["src/**"], always_allowed=["loop.yaml"])
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("x = 1\n")
    code, doc, _ = _invoke("--contract", str(contract))
    assert code == 0 and doc is not None
    schema.validate(doc, "diff")
    assert doc["kind"] == "loopkit/diff" and doc["version"] == 1
    assert [f["path"] for f in doc["files"]] == ["loop.yaml", "src/a.py"]  # type: ignore[index]

    (repo / "README.md").write_text("changed\n")
    code, doc, err = _invoke("--contract", str(contract))
    assert code == 1 and doc is not None
    assert doc["violations"] == [
        {
            "rule": "outside_writable",
            "path": "README.md",
            "detail": "modified outside writable scope",
        }
    ]
    assert "outside_writable: README.md" in err


def test_piped_attempt_gets_a_diff_section(repo: Path) -> None:
    contract = {
        "version": 1,
        "objective": "o",
        "scope": {"writable": ["docs/**"]},
        "criteria": [{"name": "c", "run": "true"}],
    }
    (repo / "README.md").write_text("changed\n")
    code, doc, _ = _invoke(
        stdin=attempt(contract=contract, task={"kind": "task", "id": "t1", "text": "t"})
    )
    assert code == 1 and doc is not None
    schema.validate(doc, "attempt")
    assert doc["task"]["id"] == "t1"  # type: ignore[index]
    assert doc["diff"]["within_policy"] is False  # type: ignore[index]


@pytest.mark.parametrize(
    ("stdin", "needle"),
    [
        ("not json", "not JSON"),
        ('{"kind": "loopkit/verify"}', "$.kind"),
        ('{"kind": "loopkit/attempt", "version": 1, "contract": {"version": 1}}', "$.contract"),
    ],
)
def test_bad_input_exits_3_with_one_line_and_no_output(repo: Path, stdin: str, needle: str) -> None:
    code, doc, err = _invoke(stdin=stdin)
    assert code == 3 and doc is None
    assert needle in err and len(err.strip().splitlines()) == 1


def test_bad_contract_file_exits_3(repo: Path) -> None:
    bad = repo / "bad.yaml"
    bad.write_text("version: 2\n")
    code, doc, err = _invoke("--contract", str(bad))
    assert code == 3 and doc is None and "bad.yaml" in err


def test_a_path_with_control_sequences_is_shown_clean_and_recorded_as_is(repo: Path) -> None:
    contract = write_contract(repo, writable=["src/**"], always_allowed=["loop.yaml"])
    name = "x\x1b]0;owned\x07\x1b[2J.py"
    (repo / name).write_text("x\n")
    code, doc, err = _invoke("--contract", str(contract))
    assert code == 1 and doc is not None
    assert doc["violations"][0]["path"] == name  # type: ignore[index]  # the evidence as is
    assert "outside_writable: x.py" in err and "\x1b" not in err and "\x07" not in err


def test_help_documents_the_exit_codes() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for text in ("--contract", "--base", "within the scope policy", "policy is violated", "70"):
        assert text in result.stdout
