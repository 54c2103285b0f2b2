"""parallel.sh stopped at the queue's steps -- as the lander built the merged tree, while
it verified, just after the branch moved, once an entry was queued; refs that cannot be
written, a full disk -- and then the plain
rerun: nothing lands twice, no worker is paid again for work queued or landed, the
checkout follows the branch (tests/crash/parallel.py judges). The large sample:
``python -m tests.crash.parallel``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.parallel import Trial, run_trial

pytestmark = [pytest.mark.slow, pytest.mark.longest]

CASES = [
    ("kill9", "merge-tree", True),  # the second entry's merged tree built
    # The lander verifying it: its clean room's HEAD read (the lander's call alone), the
    # room not yet synced.
    ("kill9", "rev-parse --verify -q HEAD", True),
    ("term", "rev-parse --verify -q HEAD", False),  # a CI runner's cancel there
    ("kill9", "update-ref -m loopkit: land 000001", True),  # the branch moved, not the checkout
    ("int", "refs/loopkit/queue/000001", True),  # queued, not landed
    ("roref", "update-ref -m loopkit: land 000001", False),  # the branch cannot move
    ("disk", "merge-tree", False),  # the disk full from the rebuild on
]


@pytest.mark.parametrize(
    ("kind", "match", "after"), CASES, ids=[f"{k}-{m[:24]}" for k, m, _ in CASES]
)
def test_a_stopped_parallel_run_is_finished_by_the_plain_rerun(
    tmp_path: Path, kind: str, match: str, after: bool
) -> None:
    t = run_trial(tmp_path, Trial(kind, 0, match=match, after=after))
    assert t.call != "(none)", f"the fault never came: {match}"
    assert t.held, f"{kind} {'after' if after else 'at'} {t.call[:60]!r}: {t.problems}"
