"""lk task's command line: the door's tables are the click commands', bad input is one
line and its code, and the output is the published schema."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loopkit import schema
from tests.helpers.recipes import recipe_env


@pytest.mark.parametrize("verb", ["begin", "save", "land", "park", "cancel", "note", "end"])
def test_the_doors_task_tables_are_the_click_commands(verb: str) -> None:
    # A plain `lk task VERB` is answered without click: its table must name every option
    # the click command has, under the keyword the step's function takes.
    import inspect

    import click

    from loopkit.cli import door, transactions
    from loopkit.cli.task import main

    command = main.commands[verb]
    opts = set()
    args = []
    for p in command.params:
        if isinstance(p, click.Option):
            opts |= {o for o in (*p.opts, *p.secondary_opts) if o not in ("-h", "--help")}
        else:
            args.append(p.name)
    positional, table = door.TASK[verb]
    assert set(table) == opts, set(table) ^ opts
    assert list(positional) == args
    taken = set(inspect.signature(getattr(transactions, verb)).parameters)
    assert {spec[1] for spec in table.values()} | set(positional) <= taken


def _git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["-c", "user.name=a", "-c", "user.email=a@b",
                 "commit", "-q", "--allow-empty", "-m", "start"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def lk(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["lk", "task", *args], cwd=repo, env=recipe_env({"LOOPKIT_VALIDATE_OUTPUT": "1"}),
                          input=stdin, capture_output=True, text=True)  # fmt: skip


def test_each_step_prints_its_schema_and_end_releases_the_lock(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path)
    begun = lk(repo, "begin", "--task-id", "t", "--owner", "1")
    assert begun.returncode == 0, begun.stderr
    doc = json.loads(begun.stdout)
    schema.validate(doc, "task-step")
    assert doc["step"] == "begin" and doc["task"] == "t" and Path(doc["start"]).is_file()
    assert doc["lock"]["path"].endswith(".git/loopkit/loop.lock")
    (repo / "x.txt").write_text("x\n")
    saved = lk(repo, "save", "1")
    schema.validate(json.loads(saved.stdout), "task-step")
    assert json.loads(saved.stdout)["ref"] == "refs/loopkit/t/1"
    ended = lk(repo, "end", "--owner", "1")
    schema.validate(json.loads(ended.stdout), "task-step")
    assert json.loads(ended.stdout)["released"] is True
    assert not (repo / ".git/loopkit/loop.lock").exists()


@pytest.mark.parametrize(
    ("args", "stdin", "code", "words"),
    [
        (["land"], "not json", 3, "<stdin>"),
        (["land", "/nonexistent.json"], None, 3, "cannot read"),
        (["park"], "", 3, "no document"),
        (["save"], None, 2, "LABEL"),
        (["save", "x"], None, 4, "no task has begun"),
    ],
)
def test_bad_input_is_one_line_and_its_code(
    tmp_path: Path, args: list[str], stdin: str | None, code: int, words: str
) -> None:
    repo = _git_repo(tmp_path)
    done = lk(repo, *args, stdin=stdin)
    assert done.returncode == code, done.stderr
    assert words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_land_of_a_decision_that_is_not_complete_is_bad_input(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path)
    lk(repo, "begin", "--task-id", "t", "--owner", "1")
    decided = json.dumps({"kind": "loopkit/attempt", "version": 1, "task": {"id": "t"},
                          "decision": {"outcome": "retry"}})  # fmt: skip
    done = lk(repo, "land", stdin=decided)
    assert done.returncode == 3 and "decision.outcome" in done.stderr, done.stderr
    assert subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=repo, capture_output=True,
                          text=True).stdout.strip() == "1"  # fmt: skip
