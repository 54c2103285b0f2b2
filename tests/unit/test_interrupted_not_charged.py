"""An admitted attempt whose loop died before its worker ran is numbered but not charged
to the attempts budget; one whose worker was about to start is charged (never let off
unproven)."""

from __future__ import annotations

from pathlib import Path

from loopkit.decision import budget, records
from loopkit.ratchet.steps import worker_ran


def _fold(ran: bool) -> dict:
    h = budget.empty_history()
    h = budget.fold(h, {"type": "admission", "admission": {"admitted": True, "reservation": {}}})
    rec = records.interrupted_record("t", h, reason="killed", now="2026-12-03T00:00:00Z", ran=ran)
    return budget.fold(h, rec)


def test_an_attempt_whose_worker_never_ran_is_numbered_not_charged() -> None:
    not_ran, ran = _fold(False), _fold(True)
    assert not_ran["attempts"] == ran["attempts"] == 1
    assert not_ran["spent_attempts"] == 0 and ran["spent_attempts"] == 1
    assert not_ran["reserved"] == [] == ran["reserved"]


def test_whether_the_worker_ran_is_read_from_the_rounds_kept(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert worker_ran(None) and worker_ran(tmp_path / "missing")  # unknown: charged
    assert worker_ran(run)  # no round admitted: nothing to let off
    (run / "1-admit.json").write_text("{}")
    (run / "1-worker").write_text("")  # lk-invoke was about to start round 1's worker
    (run / "2-admit.json").write_text("{}")
    (run / "2-invoke.json").write_text("")  # its lk-invoke began, its worker never did
    assert not worker_ran(run)
    (run / "2-worker").write_text("")
    assert worker_ran(run)
