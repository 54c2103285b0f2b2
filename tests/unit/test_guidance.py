"""Agent guidance rendered from the contract: what is in it, what is not, in-place update."""

from __future__ import annotations

import pytest

from loopkit import contract, guidance
from tests.helpers.plan import CONTRACT


@pytest.fixture
def block() -> str:
    return guidance.render(contract.with_defaults({**CONTRACT, "memory": "MEMORY.md"}))


def test_objective_scope_and_checks(block: str) -> None:
    assert CONTRACT["objective"] in block
    for glob in ("src/**", "tests/**", "docs/**", "migrations/**"):
        assert f"`{glob}`" in block
    assert "## Never change" in block
    assert "Also always allowed" in block
    assert "- **regression**: `pytest tests -q`" in block
    assert "`MEMORY.md`" in block
    assert block.startswith(guidance.BEGIN) and block.endswith(guidance.END + "\n")


def test_budgets_are_left_out() -> None:
    budgets = {"attempts": 7, "changed_lines": 4321, "cost_usd": 9.75, "wall_seconds": 3599}
    worker = {"provider": "claude", "max_turns": 17, "timeout": 901}
    text = guidance.render(
        contract.with_defaults({**CONTRACT, "budgets": budgets, "worker": worker})
    )
    for word in ("budget", "4321", "9.75", "3599", "17", "901", "max_turns", "cost", "wall"):
        assert word not in text.lower(), word


def test_sections_absent_when_empty() -> None:
    bare = {**CONTRACT, "scope": {"writable": ["src/**"]}}
    text = guidance.render(contract.with_defaults(bare))
    assert "Never change" not in text
    assert "always allowed" not in text
    assert "Lessons" not in text


def test_task_section_for_goal() -> None:
    text = guidance.render(
        CONTRACT,
        task={"id": "docs", "text": "the module is documented", "kind": "goal", "accept": ["x"]},
    )
    assert "## Your task: `docs`" in text
    assert "Goal: the module is documented" in text
    assert "- Acceptance: x" in text
    assert "reviewer reads the files" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pytest -q", "`pytest -q`"),
        ("echo `date`", "`` echo `date` ``"),
        ("`x`", "`` `x` ``"),
        ("a\nb", "`a b`"),
    ],
)
def test_code_spans_survive_backticks(text: str, expected: str) -> None:
    assert guidance.code(text) == expected


def test_update_replaces_only_the_block(block: str) -> None:
    user = "# My agents file\n\nHand-written rules.\n\n"
    first = guidance.update(user, block)
    assert first == user + block
    again = guidance.update(first + "\nMore of mine.\n", block.replace("pytest", "PYTEST"))
    assert again == user + block.replace("pytest", "PYTEST") + "\nMore of mine.\n"
    assert again.count(guidance.END) == 1


def test_update_new_and_unterminated_files(block: str) -> None:
    assert guidance.update(None, block) == block
    assert guidance.update("", block) == block
    assert guidance.update("no newline", block) == "no newline\n\n" + block
