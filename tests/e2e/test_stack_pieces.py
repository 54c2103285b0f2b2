"""The pieces under lk stack, on real repositories: a slice replayed from its recorded fork
point (a squash merge below it, a conflict), budgets shared between jobs, ledgers folded
into one exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopkit.decision import ledger
from loopkit.errors import BadInput
from loopkit.forge import fleet, onto
from loopkit.forge.stack import Refused
from tests.helpers import git


def _commit(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_slice_moves_from_its_fork_point_onto_a_squash_commit(git_repo: Path) -> None:
    base = git(git_repo, "rev-parse", "HEAD").strip()
    below = _commit(git_repo, "a.txt", "a\n", "slice a")
    slice_b = _commit(git_repo, "b.txt", "b\n", "slice b")
    # The forge squashes slice a onto main: a new commit, not an ancestor of slice b.
    git(git_repo, "checkout", "-q", "--detach", base)
    squash = _commit(git_repo, "a.txt", "a\n", "slice a (#1)")
    moved = onto.move(git_repo, fork=below, head=slice_b, onto=squash)
    assert git(git_repo, "rev-parse", f"{moved}^").strip() == squash
    # Only slice b's change is replayed: slice a is not applied twice.
    assert git(git_repo, "diff-tree", "--no-commit-id", "--name-only", "-r", moved) == "b.txt\n"
    assert git(git_repo, "log", "-1", "--format=%s%n%an", moved) == "slice b\nLoop Tester\n"
    assert onto.move(git_repo, fork=below, head=slice_b, onto=below) == slice_b


def test_a_slice_that_conflicts_with_its_new_parent_is_refused(git_repo: Path) -> None:
    base = git(git_repo, "rev-parse", "HEAD").strip()
    mine = _commit(git_repo, "README.md", "# mine\n", "mine")
    git(git_repo, "checkout", "-q", "--detach", base)
    theirs = _commit(git_repo, "README.md", "# theirs\n", "theirs")
    with pytest.raises(Refused, match=r"conflict in README\.md"):
        onto.move(git_repo, fork=base, head=mine, onto=theirs)


def test_shares_divide_the_budgets_that_span_runs() -> None:
    contract = {
        "version": 1,
        "budgets": {"cost_usd": 3, "tokens": 1000, "wall_seconds": 600, "attempts": 4},
    }
    got = fleet.share(contract, 3)["budgets"]
    assert got == {"cost_usd": 1.0, "tokens": 333, "wall_seconds": 200.0, "attempts": 4}
    assert sum([got["cost_usd"]] * 3) <= 3
    assert contract["budgets"]["cost_usd"] == 3  # the contract itself untouched
    with pytest.raises(BadInput):
        fleet.share(contract, 0)


def test_ledgers_fold_into_one_each_record_once(tmp_path: Path) -> None:
    jobs = []
    for n, task in enumerate(("alpha", "beta")):
        path = tmp_path / f"job{n}" / "ledger.jsonl"
        with ledger.Ledger(path).transaction() as txn:
            for attempt in (1, 2):
                txn.append(
                    {
                        "type": "attempt",
                        "task_id": task,
                        "attempt": attempt,
                        "recorded_at": f"2026-01-01T00:0{attempt}:0{n}.000Z",
                        "decision": {"outcome": "retry" if attempt == 1 else "complete"},
                    }
                )
        jobs.append(path)
    into = tmp_path / "all" / "ledger.jsonl"
    first = fleet.fold(into, jobs)
    assert (first["added"], first["known"]) == (4, 0)
    again = fleet.fold(into, jobs)
    assert (again["added"], again["known"]) == (0, 4)
    records, problems = ledger.read(into)
    assert not problems
    assert [r["seq"] for _, r in records] == [1, 2, 3, 4]
    assert [(r["task_id"], r["attempt"]) for _, r in records] == [
        ("alpha", 1),
        ("beta", 1),
        ("alpha", 2),
        ("beta", 2),
    ]  # in the order they were recorded
    assert json.loads(into.read_text().splitlines()[0])["kind"] == "loopkit/ledger-record"
