"""A small sample of the crash harness in every test run (tests/crash/harness.py); the
large one is `make crash`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.harness import sample

pytestmark = [pytest.mark.slow, pytest.mark.longest]


def test_a_sample_of_faults_over_a_phased_run_all_hold(tmp_path: Path) -> None:
    results = sample(tmp_path, 3, seed=20261203)
    failed = [
        f"{t.kind} at call {t.point} ({t.call[:60]}): {t.problems}" for t in results if not t.held
    ]
    assert not failed, "\n".join(failed)
