"""The README's examples stay true: its contract and TASKS.md pass lk-plan check,
and its exit-code table matches the published enum."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopkit.cli.plan import main as lk_plan
from loopkit.exitcodes import OUTCOME_CODES, ExitCode

README = Path(__file__).resolve().parents[2] / "README.md"


def _block(lang: str, needle: str) -> str:
    for body in re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S):
        if needle in body:
            return str(body)
    raise AssertionError(f"no ```{lang} block containing {needle!r} in README.md")


def _check(path: Path, *extra: str) -> dict[str, object]:
    result = CliRunner().invoke(lk_plan, ["check", str(path), *extra])
    assert result.exit_code == 0, result.stdout + result.stderr
    out: dict[str, object] = json.loads(result.stdout)
    return out


def test_readme_contract_is_valid(tmp_path: Path) -> None:
    contract = tmp_path / "loop.yaml"
    contract.write_text(_block("yaml", "objective:"))
    assert _check(contract)["valid"] is True


def test_readme_tasks_are_valid(tmp_path: Path) -> None:
    contract = tmp_path / "loop.yaml"
    contract.write_text(_block("yaml", "objective:"))
    tasks = tmp_path / "TASKS.md"
    tasks.write_text(_block("markdown", "{#blank-line}"))
    out = _check(tasks, "--contract", str(contract))
    assert out["valid"] is True


@pytest.mark.parametrize(
    "code", sorted({int(c) for c in ExitCode} | {int(c) for c in OUTCOME_CODES.values()})
)
def test_every_exit_code_is_in_the_readme_table(code: int) -> None:
    table = README.read_text().split("## Exit codes (published API)")[1].split("\n## ")[0]
    assert re.search(rf"^\| {code} \|", table, flags=re.M), f"exit code {code} missing from README"


def first_loop() -> list[str]:
    """The commands of the README's first loop, in order (comments off)."""
    body = _block("sh", "lk init")
    return [line.split("  #")[0].strip() for line in body.splitlines() if line.strip()]


def test_the_first_screen_is_the_first_loop_on_your_own_project() -> None:
    text = README.read_text()
    first_screen = "\n".join(text.splitlines()[:70])
    assert "## Your first loop, on your own project" in first_screen
    steps = first_loop()
    assert steps[0].startswith("pipx install loopkit-agents")
    assert steps[1] == "lk init" and "phased-loop.sh" in steps[-1]
    for what in ("What you will see", "When a task parks", "lk show TASK", "MEMORY.md",
                 ".loopkit/runs/TASK/"):  # fmt: skip
        assert what in first_screen, what
    # the speed internals live in docs/performance.md, a link away
    performance = text.split("## Performance\n")[1].split("\n## ")[0]
    assert len(performance.splitlines()) < 10 and "docs/performance.md" in performance
    assert (README.parent / "docs" / "performance.md").is_file()
