"""lk-verify through click's CliRunner: documents, exit codes, the contract cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopkit import schema
from loopkit.cli.verify import main
from tests.helpers.evidence import attempt, cli, write_contract


@pytest.fixture
def repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(git_repo)
    return git_repo


def _invoke(*args: str, stdin: str | None = None) -> tuple[int, dict[str, Any] | None, str]:
    return cli(main, *args, stdin=stdin)


def test_default_contract_all_pass_then_one_fails(repo: Path) -> None:
    write_contract(repo, criteria=[{"name": "a", "run": "true"}, {"name": "b", "run": "true"}])
    code, doc, _ = _invoke()
    assert code == 0 and doc is not None
    schema.validate(doc, "verify")
    assert doc["passed"] is True and doc["fingerprint"] is None
    assert [c["name"] for c in doc["checks"]] == ["a", "b"]  # type: ignore[attr-defined]

    write_contract(repo, criteria=[{"name": "a", "run": "true"}, {"name": "b", "run": "false"}])
    code, doc, err = _invoke()
    assert code == 1 and doc is not None
    schema.validate(doc, "verify")
    assert doc["passed"] is False and doc["fingerprint"]
    assert "b failed (exit 1)" in err


def test_contract_cache_follows_the_file_content(repo: Path) -> None:
    write_contract(repo, criteria=[{"name": "first", "run": "true"}])
    _invoke()
    cached = list((repo / ".git" / "loopkit" / "cache").glob("contract-*.json"))
    assert len(cached) == 1
    assert json.loads(cached[0].read_text())["criteria"][0]["name"] == "first"
    write_contract(repo, criteria=[{"name": "second", "run": "true"}])
    code, doc, _ = _invoke()
    assert code == 0 and doc is not None
    assert [c["name"] for c in doc["checks"]] == ["second"]  # type: ignore[attr-defined]
    # A cache entry that is not a contract is ignored, never trusted.
    for p in (repo / ".git" / "loopkit" / "cache").glob("contract-*.json"):
        p.write_text("[]")
    code, doc, _ = _invoke()
    assert code == 0 and doc is not None and doc["checks"][0]["name"] == "second"  # type: ignore[index]


def test_piped_attempt_gets_a_verify_section(repo: Path) -> None:
    contract = {
        "version": 1,
        "objective": "o",
        "scope": {"writable": ["**"]},
        "criteria": [{"name": "c", "run": "echo hello"}],
    }
    code, doc, _ = _invoke(stdin=attempt(contract=contract))
    assert code == 0 and doc is not None
    schema.validate(doc, "attempt")
    assert doc["verify"]["checks"][0]["output_tail"] == "hello"  # type: ignore[index]
    assert str(doc["attempt_id"]) in doc["verify"]["checks"][0]["log"]  # type: ignore[index]


def test_check_output_and_names_reach_no_terminal_raw(repo: Path) -> None:
    # A retitle, a clipboard write, colours and a C1 CSI (UTF-8 encoded), then the failure.
    run = r"printf '\033]0;owned\007\033]52;c;cm0=\007\033[31mFAIL\033[0m \302\233Kx\r\n'; exit 1"
    write_contract(repo, criteria=[{"name": "t\x1b]0;name\x07est", "run": run}])
    code, doc, err = _invoke()
    assert code == 1 and doc is not None
    assert doc["checks"][0]["output_tail"] == "FAIL x"  # type: ignore[index]
    assert doc["checks"][0]["name"] == "t\x1b]0;name\x07est"  # type: ignore[index]
    assert "test failed (exit 1)" in err
    assert "\x1b" not in err and "\x07" not in err


def test_no_contract_anywhere_exits_3(repo: Path) -> None:
    code, doc, err = _invoke()
    assert code == 3 and doc is None and "no contract" in err


def test_only_unknown_name_exits_3(repo: Path) -> None:
    write_contract(repo)
    code, doc, err = _invoke("--only", "missing")
    assert code == 3 and doc is None and "the contract has: ok" in err


def test_help_documents_the_exit_codes() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for text in ("--contract", "--only", "--fail-fast", "every check passed", "70"):
        assert text in result.stdout


def test_ratchet_against_head_per_test_and_its_document_holds_to_the_schema(repo: Path) -> None:
    # A TAP-speaking check red at HEAD ("b" fails there): --ratchet passes a tree where
    # only "b" fails, and blocks one where "a", passing at HEAD, fails too.
    script = repo / "t.sh"
    script.write_text(
        'printf "TAP version 13\\n1..2\\n"\n'
        'if grep -q bad-a value.txt; then echo "not ok 1 - a"; else echo "ok 1 - a"; fi\n'
        'echo "not ok 2 - b"\nexit 1\n'
    )
    (repo / "value.txt").write_text("fine\n")
    write_contract(repo, criteria=[{"name": "suite", "run": "sh t.sh", "timeout": 30}])
    from tests.helpers import git

    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "red at HEAD")
    code, doc, err = _invoke("--ratchet")
    assert code == 0 and doc is not None, err
    schema.validate(doc, "verify")
    assert doc["known_failures"][0]["tests"] == ["b"]
    assert doc["checks"][0]["tests"]["source"] == "tap"
    (repo / "value.txt").write_text("bad-a\n")
    code, doc, err = _invoke("--ratchet")
    assert code == 1 and doc is not None
    schema.validate(doc, "verify")
    assert doc["checks"][0]["blocking_tests"] == ["a"]
    code, doc, _ = _invoke()  # without --ratchet: the check fails as a whole
    assert code == 1


def test_a_check_that_cannot_run_is_named_with_what_is_missing(repo: Path) -> None:
    write_contract(repo, criteria=[{"name": "suite", "run": "loopkit-no-such-tool -q"}])
    code, doc, err = _invoke()
    assert code == 1 and doc is not None
    schema.validate(doc, "verify")
    [problem] = doc["environment"]
    assert problem["name"] == "suite" and problem["command"] == "loopkit-no-such-tool -q"
    # what is missing, then where the checks looked for it
    why = "`loopkit-no-such-tool` is not installed or not on PATH (exit 127); the checks' PATH: "
    assert problem["why"].startswith(why), problem["why"]
    assert "suite cannot run: `loopkit-no-such-tool -q`" in err
