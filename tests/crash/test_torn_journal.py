"""A kill -9 that leaves the task journal torn or empty (what a power loss can leave of a
file), at the moments a journal is open in a phased run: an attempt whose green commit
is made, a landing whose branch moved, a park half done. The plain rerun recovers from
it -- from the journal's twin in git, or with both gone from git and the disk -- and
finishes the plan as the harness judges it (tests/crash/harness.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.harness import run_trial

pytestmark = [pytest.mark.slow, pytest.mark.longest]

CASES = [
    # the green commit made, not landed: the journal says "attempt" (loopkit writes the
    # commit object itself; the first git call after it is the signed statement's walk to
    # the commit's roots)
    ("torn", "rev-list --max-parents=0"),
    # the branch moved to the commit, the index and the mark not yet: "landing"
    ("empty", "loopkit: alpha complete"),
    # the park reverted, its record not committed: "parking"
    ("torn", "loopkit: park broken"),
    # journal and twin both gone: rebuilt from git and the disk -- the green commit made
    # (undone: saved, the task again), the branch moved to it (finished: marked)
    ("lost", "rev-list --max-parents=0"),
    ("lost", "loopkit: alpha complete"),
]


@pytest.mark.parametrize(
    ("kind", "match"), CASES, ids=[f"{k}-{m.removeprefix('loopkit: ')}" for k, m in CASES]
)
def test_a_torn_journal_is_recovered_from(tmp_path: Path, kind: str, match: str) -> None:
    t = run_trial(tmp_path, 0, 0, kind, match=match, after=True)
    assert t.damaged, f"no journal was open at {match!r}"
    assert t.held, f"{kind} after {t.call[:60]!r}: {t.problems}"


def test_a_journal_torn_as_the_branch_is_about_to_move_is_an_attempt_again(
    tmp_path: Path,
) -> None:
    """Killed just before the landing's one transaction (the branch and the twin): the
    file already says "landing", the twin still "attempt", as git does. Torn, the rerun
    reads the twin and finishes from there -- never a landing git did not make."""
    t = run_trial(tmp_path, 0, 0, "torn", match="loopkit: alpha complete", after=False)
    assert t.damaged, "no journal was open as the branch was about to move"
    assert t.held, f"torn before {t.call[:60]!r}: {t.problems}"
