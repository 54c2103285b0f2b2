"""lk status with slices side by side: every run with a round begun and not yet decided
is listed as a worker."""

from __future__ import annotations

import os
from pathlib import Path

from loopkit import schema
from loopkit.views import status


def _run(state: Path, task: str, docs: dict[str, str]) -> None:
    folder = state / "runs" / task / "parallel-1"
    folder.mkdir(parents=True)
    for name, text in docs.items():
        (folder / name).write_text(text)


def test_every_slice_in_progress_is_a_worker(tmp_path: Path) -> None:
    state = tmp_path / ".loopkit"
    (state / "loop.lock").mkdir(parents=True)
    (state / "loop.lock" / "pid").write_text(f"{os.getpid()}\n")  # a live loop
    _run(state, "set-a", {"1-admit.json": "{}", "1-invoke.json": ""})  # its worker runs
    _run(state, "set-b", {"1-admit.json": "{}", "1-invoke.json": "{}", "1-diff.json": "{}"})
    _run(state, "done", {"1-admit.json": "{}", "1-decide.json": "{}"})  # decided: not a worker
    body = status.gather(state)
    schema.validate(body, "status")
    workers = {w["task"]: w["stage"] for w in body["workers"]}
    assert workers == {"set-a": "invoke", "set-b": "verify"}
    text = status.text(body)
    assert "2 workers side by side" in text and "set-a: round 1, stage invoke" in text


def test_no_workers_listed_when_no_loop_runs(tmp_path: Path) -> None:
    state = tmp_path / ".loopkit"
    _run(state, "set-a", {"1-admit.json": "{}", "1-invoke.json": ""})
    assert status.gather(state)["workers"] == []
